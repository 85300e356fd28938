# smqd — thin Makefile: every target is a verb, CI calls the same targets.
GO        ?= go
BIN       ?= bin
PKGS      := ./...
FUZZTIME  ?= 20s

.PHONY: all build run test test-long bench fuzz lint check clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# Builds smqd and starts it on the embedded defaults: 127.0.0.1:8080, data in ./smqd-data.
run: build
	./$(BIN)/smqd

# The whole suite with the race detector, within ~10 minutes on 2 cores.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -short -timeout 20m $(PKGS)

# Long model runs, crash matrices and soak runs.
test-long:
	$(GO) test -race -timeout 120m -tags long $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Time-boxed native fuzzing of every Fuzz target.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

check: lint test

clean:
	rm -rf $(BIN)
