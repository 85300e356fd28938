// Command smqbench is smqd's smqbench (cmd/smqbench/cli) with the peer
// brokers of package peers as further targets: --target beanstalkd, redis,
// redis-streams, nats and rabbitmq. Build it from this module:
//
//	cd bench/peers && go build -o ../../bin/smqbench-peers ./cmd/smqbench
//
// bench/peers.sh does, and runs smqd and the peers with the same workloads.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/smqd/smqd/bench/peers"
	"github.com/smqd/smqd/cmd/smqbench/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, peers.All()...)
	stop()
	os.Exit(code)
}
