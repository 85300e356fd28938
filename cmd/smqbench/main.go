// Command smqbench is smqd's load generator. It drives smqd over the MNS
// wire protocol (signed HTTP through a fasthttp client) or the engine in
// process (--target inproc) and prints a live progress line (on a
// terminal), a final table and one JSON line per run; cmd/smqbench/cli
// holds the command line.
//
// This smqbench knows no peer brokers: their clients live in the module
// github.com/smqd/smqd/bench/peers, whose smqbench (bench/peers/cmd/smqbench)
// adds --target beanstalkd, redis, redis-streams and nats. Build it with
//
//	cd bench/peers && go build -o ../../bin/smqbench-peers ./cmd/smqbench
//
// Usage:
//
//	smqbench <cycle|produce|consume|backlog> [flags]
//	smqbench report [--baseline smqd] results.jsonl...
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/smqd/smqd/cmd/smqbench/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
