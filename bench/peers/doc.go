// Package peers holds smqbench's clients of the peer brokers smqd is
// measured against: beanstalkd (beanstalk.go, its text protocol by hand),
// Redis as a list (redis.go, go-redis) and as a stream with a consumer
// group (redis_streams.go, go-redis), NATS JetStream (nats.go, nats.go)
// and RabbitMQ quorum queues (rabbitmq.go, amqp091-go). Each is a
// bench.Target driven by the same workloads as smqd.
//
// It is a Go module of its own (github.com/smqd/smqd/bench/peers, with a
// replace of github.com/smqd/smqd to ../..) so that smqd's module, and so
// every module that embeds engine, requires none of these client libraries.
// Its command, cmd/smqbench, is smqd's smqbench plus these peers:
//
//	cd bench/peers && go build -o ../../bin/smqbench-peers ./cmd/smqbench
//
// bench/peers.sh builds it that way and runs smqd and the peers side by side.
//
// Adding a peer is one file: the target, its client and a method of catalog
// (peers.go) that returns its bench.Peer. All finds the peers by listing
// catalog's methods, so no table needs editing and nothing registers itself
// at init.
package peers
