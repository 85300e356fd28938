// Package bench is smqd's load generator: the workloads, the targets they
// drive and the figures they report. cmd/smqbench/cli wires it to flags.
//
// Targets (target.go) hide how a system is driven:
//
//	MNSTarget        smqd (or any MNS server) over HTTP: fasthttp.HostClient with
//	                 keep-alive, requests signed per spec §2.2 (server/mnsauth), bodies
//	                 appended into reused buffers, responses read by a minimal
//	                 scanner (scanner.go); no allocation per request once warm
//	SDKTarget        the same server driven as the MNS SDKs drive it (sdk.go):
//	                 net/http, encoding/xml, headers in a map, Content-MD5 on
//	                 every request; smqbench --client sdk
//	InprocTarget     engine.Broker called directly, to separate engine and HTTP cost
//
// Peer brokers (beanstalkd, Redis as a list and as a stream, NATS
// JetStream) are targets too, but their clients live in a module of their
// own, github.com/smqd/smqd/bench/peers, so that this module (and every module that embeds engine) requires none of
// their client libraries. That module describes each peer as a Peer (a
// --target name and a constructor) and its own smqbench hands them to
// cmd/smqbench/cli; bench/peers.sh builds and runs that binary.
//
// Workloads (run.go, worker.go): cycle (producers and consumers together,
// measured for a window after a warm-up; the backlog is counted at both ends
// of the window), produce, consume and backlog (preload, resident memory,
// drain, optionally kill -9 and restart of a spawned daemon half way,
// daemon.go), and publish (publish.go: producers publish to a topic with N
// queue subscriptions, consumers drain the N queues; CPU per publish and per
// delivery). Producers may follow an open-loop schedule (Config.Rate); the
// latency is then measured from each batch's scheduled time, so a slow
// server cannot hide its queueing (no coordinated omission): every batch
// scheduled in the window is sent and counted by its schedule, however
// late, up to lateGrace after the window (a stall at the window's end hid
// what it delayed). Likewise the consumers go on after the window until
// they received every message scheduled in it, and record the end-to-end
// latency of each whenever it comes (Result.E2EUnseen counts those not
// received 2 × lateGrace after the window). Every message
// carries its send (or scheduled) time in its first 16 bytes, so consumers
// measure the end-to-end latency.
//
// A run that went wrong says so (Result.Error, exit 1, and report leaves
// it out): an error it returned, errors above Config.MaxErrorPct of the
// requests (a failed request counts once, as an error, in no latency), a
// backlog drain that did not get back every message it preloaded. A
// cycle whose backlog growth and sent-minus-deleted disagree at rest (the
// backlog before the workers start and after they all stop, against the
// whole run's counts) beyond its failed requests is flagged
// (Result.CountsDisagree): messages lost, delivered twice, or deletes a
// peer acknowledged before applying (NATS).
//
// Figures: latencies go into per-worker log-linear histograms (histogram.go;
// an atomic add per sample, no lock) merged at the end; a Result is printed
// as a table and as one JSON line with stable field names, and report.go
// aggregates JSON lines into medians, spreads and ratios to the best peer.
// Over the measured window, the server's CPU (/proc/<pid>/stat of the spawned
// daemon or of Config.ServerPID) and the load generator's (getrusage) are
// reported per message and as cores (cpu.go).
//
// Ownership: each worker goroutine owns its Client, its histograms and its
// window counters; the progress reporter reads only atomics. Dependency
// direction (STYLE.md §1): bench imports engine's public API, fasthttp and
// the signing leaf server/mnsauth, never server itself, wal or index
// (server only in tests).
package bench
