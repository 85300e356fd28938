package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Workload names a load shape.
type Workload string

// Workloads.
const (
	// Cycle runs producers and consumers together; consumers long-poll,
	// receive and delete. Measured for Duration after Warmup.
	Cycle Workload = "cycle"
	// Produce runs producers only.
	Produce Workload = "produce"
	// Consume runs consumers only, on what the queues hold (after an
	// optional preload of Messages).
	Consume Workload = "consume"
	// Backlog preloads Messages, then drains them; optionally kills and
	// restarts the daemon half way (RestartCheck).
	Backlog Workload = "backlog"
	// Publish is a cycle through a topic: producers publish to a topic
	// with one queue subscription per queue (Queues of them), consumers
	// receive and delete from the queues (publish.go). Consumers 0 makes it
	// producers only, like Produce.
	Publish Workload = "publish"
)

// Weight is one entry of a mix: a value and its relative weight.
type Weight struct {
	Value  int
	Weight int
}

// ParseMix parses "v:w,v:w,..." (e.g. "1:10,8:80,16:10"). An empty string
// is an empty mix.
func ParseMix(s string) ([]Weight, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Weight
	for _, part := range strings.Split(s, ",") {
		v, w, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			w = "1"
		}
		vi, err1 := strconv.Atoi(strings.TrimSpace(v))
		wi, err2 := strconv.Atoi(strings.TrimSpace(w))
		if err1 != nil || err2 != nil || wi < 0 || vi < 0 {
			return nil, fmt.Errorf("bad mix entry %q (want value:weight)", part)
		}
		out = append(out, Weight{vi, wi})
	}
	return out, nil
}

// Config describes one run. Zero fields take the defaults of withDefaults.
type Config struct {
	Workload  Workload
	Label     string // free text copied into the result (e.g. "b16-always")
	Sync      string // the target's durability class, for the report
	Producers int
	Consumers int
	BodyBytes int // message body size, at least 16 (the send stamp)
	// Batch sizes 1..16. A consumer deletes DeleteBatch handles at a time
	// (what is left when a receive comes back empty is deleted at once).
	SendBatch, RecvBatch, DeleteBatch int
	Queues                            int
	QueuePrefix                       string // queue names are prefix-0, prefix-1, ...
	KeepQueues                        bool   // do not delete and recreate the queues
	PriorityMix                       []Weight
	DelayMix                          []Weight // seconds
	// Topic is the publish workload's topic; default QueuePrefix-topic. Its
	// subscriptions are one per queue: Queues is the fan-out.
	Topic string
	// Rate is the open-loop arrival rate in messages per second over all
	// producers (0: closed loop, as fast as each producer can). Latency is
	// measured from each batch's scheduled time.
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
	// Messages caps the messages sent (cycle, produce) or preloaded
	// (consume, backlog); 0 means no cap for cycle and produce.
	Messages int64
	// Wait is the long-poll wait of a receive; default 1 s.
	Wait time.Duration
	// MaxTime bounds each phase of backlog and consume (preload, drain);
	// default 10 minutes.
	MaxTime time.Duration
	// MaxBacklog (cycle, closed loop) holds producers back while the
	// messages sent but not yet deleted in this run exceed it, so that the
	// cycle runs at the pace the consumers sustain and the backlog cannot
	// grow: the deleted rate is then the sustainable throughput. 0 means
	// 10 x Consumers x RecvBatch; negative disables it (producers run free
	// and a backlog that grows is only flagged).
	MaxBacklog int64
	// BacklogTolerance is how much the backlog may grow over a cycle's
	// window before the run is flagged; 0 means max(1 % of the messages
	// sent in the window, what the workers can hold in flight), and under
	// flow control (MaxBacklog) at least the room left below its limit.
	BacklogTolerance int64
	// MaxErrorPct fails a run whose errors are more than this share of
	// its requests (percent): its figures are not those of a clean run.
	MaxErrorPct float64
	Seed        uint64
	// Progress, if set, is called every ProgressInterval (default 1 s) from
	// a separate goroutine.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// Daemon is the spawned server process, if any: its resident memory is
	// read after a backlog preload, and RestartCheck kills and restarts it.
	Daemon Process
	// RestartCheck (backlog): after draining RestartAfter of the preload,
	// kill -9 the daemon, restart it, time the first successful receive and
	// count the messages it recovered.
	RestartCheck bool
	RestartAfter float64 // default 0.5
	// SettleTime (backlog): how long to wait, at most, after the preload
	// for the target's resident memory to stop falling (Result.RSSSettled).
	SettleTime time.Duration
	// ServerPID is the server process whose CPU time is measured over the
	// window (a peer broker, or an smqd the bench did not start); 0 means the
	// Daemon's, if there is one. See cpu.go.
	ServerPID int
	// ServerPIDs are further server processes whose CPU is added to
	// ServerPID's (the other nodes of a cluster, so that the server's CPU
	// per message is the whole cluster's).
	ServerPIDs []int
	// Client names the client implementation driving the target, copied
	// into the result ("fast", "sdk"); empty when the target has no choice.
	Client string
	// RSSPID, when no Daemon is given, is a server process (a peer) whose
	// resident memory a backlog run reads after the preload.
	RSSPID int
	// AfterPreload, if set, is called when a backlog preload is done (e.g.
	// to write a heap profile of an in-process engine).
	AfterPreload func()
}

// Process is a server process the bench started.
type Process interface {
	PID() int
	Kill() error  // SIGKILL and reap
	Start() error // start again with the same arguments (not waiting for readiness)
}

func (c Config) withDefaults() Config {
	if c.Workload == "" {
		c.Workload = Cycle
	}
	if c.Producers <= 0 && c.Workload != Consume {
		c.Producers = 8
	}
	if c.Consumers <= 0 && c.Workload != Produce && c.Workload != Publish {
		c.Consumers = 8
	}
	if c.BodyBytes <= 0 {
		c.BodyBytes = 1024
	}
	if c.SendBatch <= 0 {
		c.SendBatch = 1
	}
	if c.RecvBatch <= 0 {
		c.RecvBatch = c.SendBatch
	}
	if c.DeleteBatch <= 0 {
		c.DeleteBatch = c.RecvBatch
	}
	if c.Queues <= 0 {
		c.Queues = 1
	}
	if c.QueuePrefix == "" {
		c.QueuePrefix = "bench"
	}
	if c.Topic == "" {
		c.Topic = c.QueuePrefix + "-topic"
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Wait <= 0 {
		c.Wait = time.Second
	}
	if c.MaxTime <= 0 {
		c.MaxTime = 10 * time.Minute
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = time.Second
	}
	if c.RestartAfter <= 0 || c.RestartAfter >= 1 {
		c.RestartAfter = 0.5
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch c.Workload {
	case Cycle, Produce, Consume, Backlog, Publish:
	default:
		return fmt.Errorf("unknown workload %q (cycle, produce, consume, backlog, publish)", c.Workload)
	}
	if c.Workload == Publish {
		if c.SendBatch != 1 {
			return errors.New("publish: PublishMessage has no batch form, the send batch must be 1")
		}
		if len(c.PriorityMix) > 0 || len(c.DelayMix) > 0 {
			return errors.New("publish: a publish has no priority or delay (deliveries take the queue's)")
		}
		if c.Queues > 100 {
			return errors.New("publish: at most 100 subscriptions (queues) per topic")
		}
	}
	for _, b := range []int{c.SendBatch, c.RecvBatch, c.DeleteBatch} {
		if b < 1 || b > 16 {
			return errors.New("batch sizes must be 1..16")
		}
	}
	if c.Workload == Backlog && c.Messages <= 0 {
		return errors.New("backlog needs --messages")
	}
	if c.Workload == Backlog && (c.Producers <= 0 || c.Consumers <= 0) {
		return errors.New("backlog needs producers and consumers")
	}
	if c.RestartCheck && (c.Workload != Backlog || c.Daemon == nil) {
		return errors.New("the restart check needs the backlog workload and a spawned daemon (--spawn)")
	}
	if c.Wait > 30*time.Second {
		return errors.New("wait must be at most 30 s")
	}
	for _, w := range c.PriorityMix {
		if w.Value < 1 || w.Value > 16 {
			return errors.New("priorities must be 1..16")
		}
	}
	return nil
}

// Progress is a live snapshot for a progress line.
type Progress struct {
	Phase       string // "warmup", "measure", "preload", "drain", "restart"
	Elapsed     time.Duration
	SentPerS    float64 // over the last interval
	DeletedPerS float64
	Errors      int64 // so far
	SendP99     time.Duration
	E2EP99      time.Duration // over the measured window so far
}
