package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/bench/peers"
	"github.com/smqd/smqd/cmd/smqbench/cli"
)

// TestPeerTargets checks that this smqbench offers every peer and reaches
// one: a beanstalkd run against a port where nothing listens fails to
// connect (not as an unknown target).
func TestPeerTargets(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := cli.Run(context.Background(), []string{"cycle", "-h"}, nil, &stdout, &stderr, peers.All()...); code != 0 {
		t.Fatalf("-h exit %d", code)
	}
	for _, p := range peers.All() {
		if !strings.Contains(stderr.String(), "| "+p.Name) {
			t.Errorf("--target help lacks %s:\n%s", p.Name, stderr.String())
		}
	}
	stderr.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"cycle", "--target", "beanstalkd", "--addr", "127.0.0.1:1", "--warmup", "0s", "--duration", "100ms", "--progress=false"}
	code := cli.Run(ctx, args, nil, &stdout, &stderr, peers.All()...)
	if code != 1 || !strings.Contains(stderr.String(), "beanstalkd") || strings.Contains(stderr.String(), "--target must be") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
