package server

// The broker collector: queue, message and storage metrics, read from one
// engine.Broker.Stats snapshot per scrape and handed to the registry as
// constant metrics.
//
// Per-queue series are bounded by Options.MetricsPerQueue: "all" writes
// every queue (9 series each: 10,000 queues made a 3.8 MB exposition),
// "top:N" only the N queues with the largest backlog (active + inactive +
// delayed; ties by name), "off" none. The totals (smqd_messages{state},
// smqd_messages_*_total, smqd_queues) always cover every queue, and
// smqd_metrics_queues_omitted says how many queues were left out.
//
// The *_total counters stay monotonic when queues go away: the collector
// remembers each queue's counters and id from the previous scrape and,
// when a queue has disappeared (or come back with another id: deleted and
// created again; or with smaller counters: its broker reopened), adds what
// it had to a retired sum. What a deleted queue counted after the last
// scrape before its deletion is not seen.
//
// In a cluster a node reports the queues of the shards it leads, and a
// replica counts what it applies as a follower too (so that a queue's
// series goes on from the same value on its next leader), so a queue whose
// lead comes back to a node arrives with its whole history in its
// counters: added to the totals again at each return, the sum over the
// nodes read 4,825 sends for 3,301 (cluster ops audit, 2026-12-06). There
// the totals take from a queue that appears after the first scrape only
// what it counts from then on (its base), as a new Prometheus series
// counts from its first sample: a new queue's first interval is not
// counted. (Telling a new queue from a returning one by its creation time
// counted one whose lead moved soon after its creation on both nodes, and
// depended on the nodes' clocks: review, 2026-12-06.)

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// DefaultMetricsPerQueue is the per-queue series selection of a zero
// Options.MetricsPerQueue.
const DefaultMetricsPerQueue = "top:100"

// parseMetricsPerQueue turns "all", "off" or "top:N" (N >= 1) into a limit:
// -1 for all, 0 for none, else N.
func parseMetricsPerQueue(s string) (int, error) {
	switch s {
	case "all":
		return -1, nil
	case "off":
		return 0, nil
	}
	if n, ok := strings.CutPrefix(s, "top:"); ok {
		v, err := strconv.Atoi(n)
		if err == nil && v >= 1 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("server: MetricsPerQueue must be all, off or top:N with N >= 1, not %q", s)
}

// queueCounters are the monotonic counters of one queue.
type queueCounters struct{ sent, received, deleted, expired, unreadable int64 }

func (a *queueCounters) add(b queueCounters) {
	a.sent += b.sent
	a.received += b.received
	a.deleted += b.deleted
	a.expired += b.expired
	a.unreadable += b.unreadable
}

func (a queueCounters) minus(b queueCounters) queueCounters {
	return queueCounters{a.sent - b.sent, a.received - b.received, a.deleted - b.deleted, a.expired - b.expired, a.unreadable - b.unreadable}
}

// seenQueue is a queue's counters at the previous scrape (last) and when
// it (re)appeared (base: zero on a single node, see the file comment),
// and its id then (a queue made again under its name has another).
type seenQueue struct {
	base, last queueCounters
	id         uint64
}

// below reports whether any counter of a is smaller than b's.
func (a queueCounters) below(b queueCounters) bool {
	return a.sent < b.sent || a.received < b.received || a.deleted < b.deleted || a.expired < b.expired || a.unreadable < b.unreadable
}

type brokerCollector struct {
	s     *Server
	limit int // per-queue series: -1 all, 0 none, N the top N by backlog

	mu      sync.Mutex           // serialises Collect (concurrent scrapes)
	seen    map[string]seenQueue // guarded by mu: queues at the previous scrape
	retired queueCounters        // guarded by mu: counters of queues gone since start
	scraped bool                 // guarded by mu: a scrape has read the stats

	// A cluster node's shard brokers at the previous scrape, and the
	// storage and push counters of those replaced since (carry).
	shards       []shardSeen         // guarded by mu
	retiredStore engine.StorageStats // guarded by mu: counters only
	retiredPush  engine.PushStats    // guarded by mu: counters only

	descs []*prometheus.Desc
	d     brokerDescs
}

// brokerDescs are the descriptors of the families with labels or of
// special shape; plain unlabelled gauges and counters are described from
// their tables in Collect.
type brokerDescs struct {
	conns, connsMax, acceptWaits                     *prometheus.Desc
	queues, longPolls, omitted                       *prometheus.Desc
	queueMessages, queueWaiting, queueOldest, oldest *prometheus.Desc
	queueSent, queueReceived, queueDeleted, queueExp *prometheus.Desc
	queueUnreadable, queueDeadLettered               *prometheus.Desc
	pushSubs, pushBacklog, pushes, relayBacklog      *prometheus.Desc
	messages, sent, received, deleted, expired       *prometheus.Desc
	fsyncSeconds, batchRecords                       *prometheus.Desc
	storageGauges, storageCounters                   []*prometheus.Desc
	storageGaugeVals, storageCounterVals             []func(*engine.StorageStats) float64
	storageGaugeMax                                  []bool // over a cluster node's shards: the largest, not the sum
	walCounters                                      []*prometheus.Desc
	walCounterVals                                   []func(*engine.StorageStats) uint64
}

func newBrokerCollector(s *Server) *brokerCollector {
	limit, err := parseMetricsPerQueue(s.opts.MetricsPerQueue)
	if err != nil {
		limit = -1 // unreachable: Validate checked it
	}
	c := &brokerCollector{s: s, limit: limit, seen: map[string]seenQueue{}}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		d := prometheus.NewDesc(name, help, labels, nil)
		c.descs = append(c.descs, d)
		return d
	}
	d := &c.d
	d.conns = desc("smqd_http_connections", "Client connections held open on the API listeners.")
	d.connsMax = desc("smqd_http_connections_max", "The connection cap (--max-conns).")
	d.acceptWaits = desc("smqd_http_accept_waits_total", "Times the API listeners stopped accepting because the connection cap was reached.")
	d.queues = desc("smqd_queues", "Number of queues.")
	d.longPolls = desc("smqd_long_polls_waiting", "Receives waiting for a message, all queues.")
	d.omitted = desc("smqd_metrics_queues_omitted", "Queues without per-queue series (--metrics-per-queue); the smqd_messages* totals still count them.")
	d.queueMessages = desc("smqd_queue_messages", "Messages by queue and state.", "queue", "state")
	d.queueOldest = desc("smqd_queue_oldest_message_age_seconds", "How long the oldest message waiting for a receive has been in the queue (0: none waits); approximate: the oldest at the head of a priority lane.", "queue")
	d.oldest = desc("smqd_oldest_message_age_seconds", "The largest smqd_queue_oldest_message_age_seconds of all queues.")
	d.queueSent = desc("smqd_queue_sent_total", "Messages sent since start.", "queue")
	d.queueReceived = desc("smqd_queue_received_total", "Messages received since start (each receive of a message counts).", "queue")
	d.queueDeleted = desc("smqd_queue_deleted_total", "Messages deleted since start.", "queue")
	d.queueExp = desc("smqd_queue_expired_total", "Messages dropped by retention since start.", "queue")
	d.queueUnreadable = desc("smqd_queue_unreadable_total", "Messages dropped since start because their bodies were damaged on disk.", "queue")
	d.queueDeadLettered = desc("smqd_queue_dead_lettered_total", "Messages moved to the queue's dead-letter queue since start.", "queue")
	d.queueWaiting = desc("smqd_queue_long_polls_waiting", "Receives waiting for a message, by queue.", "queue")
	d.messages = desc("smqd_messages", "Messages by state, all queues.", "state")
	d.sent = desc("smqd_messages_sent_total", "Messages sent since start, all queues (deleted queues included).")
	d.received = desc("smqd_messages_received_total", "Message receives since start, all queues (deleted queues included).")
	d.deleted = desc("smqd_messages_deleted_total", "Messages deleted since start, all queues (deleted queues included).")
	d.expired = desc("smqd_messages_expired_total", "Messages dropped by retention since start, all queues (deleted queues included).")
	d.pushSubs = desc("smqd_push_subscriptions", "HTTP subscriptions being pushed.")
	d.pushBacklog = desc("smqd_push_backlog", "Notifications waiting or in flight in the HTTP subscriptions' push queues.")
	d.relayBacklog = desc("smqd_topic_relay_backlog", "Deliveries of publishes to queues on another shard (cluster mode) waiting or in flight in their subscriptions' relay queues; an Unsubscribe or DeleteTopic waits up to 5 s for them, then discards what is left.")
	d.pushes = desc("smqd_push_notifications_total", "HTTP push outcomes since start: delivered (2xx), failed (each failed attempt), dead_lettered, discarded (no retry left and no dead-letter queue, or waiting when the subscription or topic was deleted).", "outcome")
	d.fsyncSeconds = desc("smqd_wal_fsync_duration_seconds", "Latency of each fdatasync of a WAL segment.")
	d.batchRecords = desc("smqd_wal_batch_records", "Records per group-commit write batch.")

	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauges := []struct {
		name, help string
		get        func(*engine.StorageStats) float64
	}{
		{"smqd_storage_durable", "1 if messages are kept in the write-ahead log and the index, 0 with --in-memory.", func(st *engine.StorageStats) float64 { return b2f(st.Durable) }},
		{"smqd_log_segments", "Log segments held.", func(st *engine.StorageStats) float64 { return float64(st.Segments) }},
		{"smqd_log_bytes", "Bytes the log's segments span.", func(st *engine.StorageStats) float64 { return float64(st.LogBytes) }},
		{"smqd_log_live_bytes", "Bytes of log records that hold live message bodies.", func(st *engine.StorageStats) float64 { return float64(st.LiveBytes) }},
		{"smqd_log_end_position", "The log's end position (bytes appended since the log began).", func(st *engine.StorageStats) float64 { return float64(st.LogEnd) }},
		{"smqd_checkpoint_position", "Log position the index reflects (the last checkpoint).", func(st *engine.StorageStats) float64 { return float64(st.CheckpointAt) }},
		{"smqd_checkpoint_lag_bytes", "Log bytes not yet folded into the index: replayed at the next start.", func(st *engine.StorageStats) float64 {
			if st.Durable && st.LogEnd > st.CheckpointAt {
				return float64(st.LogEnd - st.CheckpointAt)
			}
			return 0
		}},
		{"smqd_index_bytes", "Bytes of the index directory on disk.", func(st *engine.StorageStats) float64 { return float64(st.IndexBytes) }},
		{"smqd_disk_full", "1 while free space is below the reserve: new messages and queues are refused, receives and deletes work.", func(st *engine.StorageStats) float64 { return b2f(st.DiskFull) }},
		{"smqd_disk_free_bytes", "Free bytes of the data directory's file system at the last sample.", func(st *engine.StorageStats) float64 { return float64(st.FreeBytes) }},
		{"smqd_disk_reserve_bytes", "Free space below which new messages are refused (0: the guard is off).", func(st *engine.StorageStats) float64 { return float64(st.FreeSpaceReserve) }},
		{"smqd_recovery_duration_seconds", "Time the last start-up took to rebuild the state from the index and the log (the longest shard's on a cluster node).", func(st *engine.StorageStats) float64 { return st.Recovery.Took.Seconds() }},
		{"smqd_recovery_replayed_records", "Log records past the checkpoint the last start-up replayed (after a clean stop, about none).", func(st *engine.StorageStats) float64 { return float64(st.Recovery.Replayed) }},
		{"smqd_recovery_resynced_bytes", "Log bytes past the checkpoint the last start-up wrote again and fsynced before serving (what a crash left in the page cache).", func(st *engine.StorageStats) float64 { return float64(st.Recovery.Resynced) }},
		{"smqd_recovery_lost_messages", "Messages the last start-up dropped because their records lay in damaged or cut parts of the log (a --wal-repair start; 0 otherwise).", func(st *engine.StorageStats) float64 { return float64(st.Recovery.Lost) }},
		{"smqd_compaction_waiting_segments", "Mostly-dead log segments compaction leaves alone because consumers are emptying them fast enough (at most a minute each).", func(st *engine.StorageStats) float64 { return float64(st.Compaction.Waiting) }},
	}
	for _, g := range gauges {
		d.storageGauges = append(d.storageGauges, desc(g.name, g.help))
		d.storageGaugeVals = append(d.storageGaugeVals, g.get)
		// Over a cluster node's shards, which share its disk: the largest
		// (each shard's broker holds the node's reserve: engine/cluster
		// shardShare; their sum overstated it 8 times).
		d.storageGaugeMax = append(d.storageGaugeMax, g.name == "smqd_storage_durable" || g.name == "smqd_disk_full" ||
			g.name == "smqd_disk_free_bytes" || g.name == "smqd_disk_reserve_bytes" || g.name == "smqd_recovery_duration_seconds")
	}
	counters := []struct {
		name, help string
		get        func(*engine.StorageStats) float64
	}{
		{"smqd_checkpoints_total", "Checkpoints written since start.", func(st *engine.StorageStats) float64 { return float64(st.Checkpoints) }},
		{"smqd_storage_replay_waits_total", "Operations (sends, receives, deletes, visibility changes) that waited for the checkpointer because too much log lay beyond the last checkpoint.", func(st *engine.StorageStats) float64 { return float64(st.ReplayWaits) }},
		{"smqd_storage_unreadable_bodies_total", "Messages dropped because their bodies were damaged on disk (each is logged once with its id).", func(st *engine.StorageStats) float64 { return float64(st.Unreadable) }},
		{"smqd_disk_full_events_total", "Times the broker entered the disk-full state since start.", func(st *engine.StorageStats) float64 { return float64(st.DiskFullEvents) }},
		{"smqd_compaction_segments_removed_total", "Log segments compaction removed (no live bodies left in them).", func(st *engine.StorageStats) float64 { return float64(st.Compaction.SegmentsRemoved) }},
		{"smqd_compaction_relocated_bodies_total", "Message bodies compaction rewrote at the head of the log, to free a mostly-dead segment.", func(st *engine.StorageStats) float64 { return float64(st.Compaction.Relocated) }},
		{"smqd_compaction_relocated_bytes_total", "Bytes of the bodies compaction rewrote.", func(st *engine.StorageStats) float64 { return float64(st.Compaction.RelocatedBytes) }},
	}
	for _, k := range counters {
		d.storageCounters = append(d.storageCounters, desc(k.name, k.help))
		d.storageCounterVals = append(d.storageCounterVals, k.get)
	}
	wal := []struct {
		name, help string
		get        func(*engine.StorageStats) uint64
	}{
		{"smqd_wal_records_total", "Records appended to the WAL.", func(st *engine.StorageStats) uint64 { return st.WAL.Records }},
		{"smqd_wal_payload_bytes_total", "Payload bytes appended to the WAL, before compression.", func(st *engine.StorageStats) uint64 { return st.WAL.PayloadBytes }},
		{"smqd_wal_bytes_total", "Framed bytes appended to the WAL (what reaches the files).", func(st *engine.StorageStats) uint64 { return st.WAL.Bytes }},
		{"smqd_wal_compressed_records_total", "WAL records stored compressed.", func(st *engine.StorageStats) uint64 { return st.WAL.CompressedRecords }},
		{"smqd_wal_writes_total", "Group-commit write batches.", func(st *engine.StorageStats) uint64 { return st.WAL.Writes }},
		{"smqd_wal_write_calls_total", "Write calls on WAL segment files.", func(st *engine.StorageStats) uint64 { return st.WAL.WriteCalls }},
		{"smqd_wal_fsyncs_total", "fdatasync calls on WAL segment files.", func(st *engine.StorageStats) uint64 { return st.WAL.Fsyncs }},
		{"smqd_wal_segment_rolls_total", "WAL segment rolls.", func(st *engine.StorageStats) uint64 { return st.WAL.Rolls }},
		{"smqd_wal_append_stalls_total", "Appends that waited for room in the WAL's ring buffer.", func(st *engine.StorageStats) uint64 { return st.WAL.AppendStalls }},
		{"smqd_wal_ring_reads_total", "Body reads served from the WAL's in-memory ring.", func(st *engine.StorageStats) uint64 { return st.WAL.RingReads }},
		{"smqd_wal_file_reads_total", "Body reads served from WAL segment files.", func(st *engine.StorageStats) uint64 { return st.WAL.FileReads }},
		{"smqd_wal_spare_failures_total", "Failed attempts to prepare a new WAL segment file (retried with backoff).", func(st *engine.StorageStats) uint64 { return st.WAL.SpareFailures }},
		{"smqd_wal_roll_stalls_total", "Segment rolls that had to wait for a segment file.", func(st *engine.StorageStats) uint64 { return st.WAL.RollStalls }},
		{"smqd_wal_sticky_failures_total", "WAL write or fsync failures (the log takes no change until the broker is reopened: in place on a single node, the shard restarted on a cluster node).", func(st *engine.StorageStats) uint64 { return st.WAL.StickyFailures }},
	}
	for _, w := range wal {
		d.walCounters = append(d.walCounters, desc(w.name, w.help))
		d.walCounterVals = append(d.walCounterVals, w.get)
	}
	return c
}

// Describe sends every descriptor.
func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect takes one Stats snapshot and sends every broker metric.
func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	d := &c.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	s := c.s
	gauge(d.conns, float64(s.conns.connections()))
	gauge(d.connsMax, float64(cap(s.conns.slots)))
	counter(d.acceptWaits, float64(s.conns.waits.Load()))

	st := s.metricStats()
	if s.c != nil {
		held, push := c.carry(st.Brokers)
		st.Storage = append(st.Storage, held)
		addPushCounters(&st.Push, push)
	}
	s.metrics.shared.queues.Store(int64(st.Walked))
	gauge(d.queues, float64(len(st.Queues)))
	gauge(d.longPolls, float64(st.LongPolls))
	gauge(d.pushSubs, float64(st.Push.Subscriptions))
	gauge(d.pushBacklog, float64(st.Push.Backlog))
	gauge(d.relayBacklog, float64(st.Push.RelayBacklog))
	counter(d.pushes, float64(st.Push.Delivered), "delivered")
	counter(d.pushes, float64(st.Push.Failed), "failed")
	counter(d.pushes, float64(st.Push.DeadLettered), "dead_lettered")
	counter(d.pushes, float64(st.Push.Discarded), "discarded")

	// Totals over every queue, and the retired counters of queues gone.
	var active, inactive, delayed int64
	var oldest time.Duration
	for i := range st.Queues {
		q := &st.Queues[i]
		active += q.Active
		inactive += q.Inactive
		delayed += q.Delayed
		oldest = max(oldest, q.OldestActive)
	}
	total := c.totals(st.Queues, s.c != nil)
	gauge(d.messages, float64(active), "active")
	gauge(d.messages, float64(inactive), "inactive")
	gauge(d.messages, float64(delayed), "delayed")
	gauge(d.oldest, oldest.Seconds())
	counter(d.sent, float64(total.sent))
	counter(d.received, float64(total.received))
	counter(d.deleted, float64(total.deleted))
	counter(d.expired, float64(total.expired))

	qs := selectQueues(st.Queues, c.limit)
	gauge(d.omitted, float64(len(st.Queues)-len(qs)))
	for i := range qs {
		q := &qs[i]
		gauge(d.queueMessages, float64(q.Active), q.Name, "active")
		gauge(d.queueMessages, float64(q.Inactive), q.Name, "inactive")
		gauge(d.queueMessages, float64(q.Delayed), q.Name, "delayed")
		counter(d.queueSent, float64(q.Sent), q.Name)
		counter(d.queueReceived, float64(q.Received), q.Name)
		counter(d.queueDeleted, float64(q.Deleted), q.Name)
		counter(d.queueExp, float64(q.Expired), q.Name)
		counter(d.queueUnreadable, float64(q.Unreadable), q.Name)
		counter(d.queueDeadLettered, float64(q.DeadLettered), q.Name)
		gauge(d.queueWaiting, float64(q.Waiting), q.Name)
		gauge(d.queueOldest, q.OldestActive.Seconds(), q.Name)
	}

	for i, desc := range d.storageGauges {
		v := 0.0
		for k := range st.Storage {
			x := d.storageGaugeVals[i](&st.Storage[k])
			if d.storageGaugeMax[i] {
				v = max(v, x)
			} else {
				v += x
			}
		}
		gauge(desc, v)
	}
	for i, desc := range d.storageCounters {
		v := 0.0
		for k := range st.Storage {
			v += d.storageCounterVals[i](&st.Storage[k])
		}
		counter(desc, v)
	}
	for i, desc := range d.walCounters {
		var v uint64
		for k := range st.Storage {
			v += d.walCounterVals[i](&st.Storage[k])
		}
		counter(desc, float64(v))
	}
	fsync, batch := sumHistograms(st.Storage, func(ss *engine.StorageStats) *wal.Histogram { return &ss.WAL.FsyncSeconds }),
		sumHistograms(st.Storage, func(ss *engine.StorageStats) *wal.Histogram { return &ss.WAL.BatchRecords })
	c.histogram(ch, d.fsyncSeconds, fsync.Bounds, fsync.Counts, fsync.Sum)
	c.histogram(ch, d.batchRecords, batch.Bounds, batch.Counts, batch.Sum)
}

// sumHistograms adds up one histogram of several brokers (same bounds).
func sumHistograms(ss []engine.StorageStats, get func(*engine.StorageStats) *wal.Histogram) wal.Histogram {
	var out wal.Histogram
	for i := range ss {
		out.Add(*get(&ss[i]))
	}
	return out
}

// histogram sends a constant histogram from per-bucket (non-cumulative)
// counts and their upper bounds; a count without a bound, or with an
// infinite one, belongs to the +Inf bucket, which the encoder adds.
func (c *brokerCollector) histogram(ch chan<- prometheus.Metric, desc *prometheus.Desc, bounds []float64, counts []uint64, sum float64) {
	constHistogram(ch, desc, bounds, counts, sum)
}

// constHistogram sends a constant histogram (see histogram) with the
// given label values.
func constHistogram(ch chan<- prometheus.Metric, desc *prometheus.Desc, bounds []float64, counts []uint64, sum float64, labels ...string) {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, n := range counts {
		cum += n
		if i < len(bounds) && !math.IsInf(bounds[i], 1) {
			buckets[bounds[i]] = cum
		}
	}
	m, err := prometheus.NewConstHistogram(desc, cum, sum, buckets, labels...)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(desc, errors.Join(errors.New("histogram"), err))
		return
	}
	ch <- m
}

// selectQueues returns the queues that get per-queue series: all (limit
// < 0), none (0), or the limit queues with the largest backlog, ties by
// name. It may reorder qs.
func selectQueues(qs []engine.QueueStats, limit int) []engine.QueueStats {
	if limit < 0 || len(qs) <= limit {
		return qs
	}
	if limit == 0 {
		return nil
	}
	slices.SortFunc(qs, func(a, b engine.QueueStats) int {
		if c := cmp.Compare(b.Active+b.Inactive+b.Delayed, a.Active+a.Inactive+a.Delayed); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return qs[:limit]
}

// totals returns the *_total counters over qs (see the file comment;
// clustered: a cluster node's queues).
func (c *brokerCollector) totals(qs []engine.QueueStats, clustered bool) queueCounters {
	var total queueCounters
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[string]seenQueue, len(qs))
	gone := func(q seenQueue) { c.retired.add(q.last.minus(q.base)) }
	for i := range qs {
		q := &qs[i]
		qc := queueCounters{q.Sent, q.Received, q.Deleted, q.Expired, q.Unreadable}
		prev, ok := c.seen[q.Name]
		if ok && prev.id != q.ID {
			// Deleted and made again since the last scrape (its new
			// counters may have passed the old ones, which below misses).
			gone(prev)
			ok, prev = false, seenQueue{}
		}
		switch {
		case !ok && clustered && c.scraped:
			prev.base = qc // its lead moved here (or it is new): counted from now
		case !ok:
		case qc.below(prev.last):
			gone(prev) // its broker reopened (a cluster's rebuild), counting from 0
			prev.base = queueCounters{}
		}
		prev.last, prev.id = qc, q.ID
		now[q.Name] = prev
		total.add(qc.minus(prev.base))
	}
	for name, prev := range c.seen {
		if _, ok := now[name]; !ok {
			gone(prev)
		}
	}
	c.seen = now
	c.scraped = true
	total.add(c.retired)
	return total
}

// shardSeen is a shard's broker at the previous scrape (weak: a replaced
// broker's state must not stay in memory) and its counters then.
type shardSeen struct {
	b       weak.Pointer[engine.Broker]
	storage engine.StorageStats
	push    engine.PushStats
}

// carry keeps a cluster node's storage and push counters monotonic when a
// shard's broker is replaced (a rebuild after a step-down, a restart after
// a failed log; engine/cluster): the node's families are sums over its
// shards' brokers, and a new broker counts from 0, so the sum fell by the
// old broker's share, which rate() reads as a reset of the whole sum (a
// spike of what every other shard counted). It returns the counters to add:
// those of the brokers replaced since start, as of the last scrape that
// saw them, and those of shards with no broker now (being replaced). What
// a broker counted after the last scrape before its replacement is not
// seen. Kept here, not in engine/cluster at the replacement: a broker still
// counts (compaction, pushes) until it is closed, and its counters read
// before the swap left a window in which the sum fell by what it counted
// meanwhile; carried from the scrapes, the sum can only rise.
func (c *brokerCollector) carry(now []brokerSample) (engine.StorageStats, engine.PushStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.shards) < len(now) {
		c.shards = append(c.shards, shardSeen{})
	}
	var held engine.StorageStats
	var heldPush engine.PushStats
	for i, x := range now {
		prev := &c.shards[i]
		known := prev.b != weak.Pointer[engine.Broker]{}
		if x.b == nil {
			if known {
				addStorageCounters(&held, prev.storage)
				addPushCounters(&heldPush, prev.push)
			}
			continue
		}
		w := weak.Make(x.b)
		if known && w != prev.b {
			addStorageCounters(&c.retiredStore, prev.storage)
			addPushCounters(&c.retiredPush, prev.push)
		}
		*prev = shardSeen{w, x.storage, x.push}
	}
	addStorageCounters(&held, c.retiredStore)
	addPushCounters(&heldPush, c.retiredPush)
	return held, heldPush
}

// addStorageCounters adds the counters of b (not its gauges) to a.
func addStorageCounters(a *engine.StorageStats, b engine.StorageStats) {
	a.Unreadable += b.Unreadable
	a.Checkpoints += b.Checkpoints
	a.ReplayWaits += b.ReplayWaits
	a.DiskFullEvents += b.DiskFullEvents
	a.Compaction.SegmentsRemoved += b.Compaction.SegmentsRemoved
	a.Compaction.Relocated += b.Compaction.Relocated
	a.Compaction.RelocatedBytes += b.Compaction.RelocatedBytes
	w, o := &a.WAL, &b.WAL
	w.Records += o.Records
	w.PayloadBytes += o.PayloadBytes
	w.Bytes += o.Bytes
	w.CompressedRecords += o.CompressedRecords
	w.Writes += o.Writes
	w.WriteCalls += o.WriteCalls
	w.Fsyncs += o.Fsyncs
	w.Rolls += o.Rolls
	w.AppendStalls += o.AppendStalls
	w.RingReads += o.RingReads
	w.FileReads += o.FileReads
	w.ReaderRingReads += o.ReaderRingReads
	w.ReaderFileReads += o.ReaderFileReads
	w.SpareFailures += o.SpareFailures
	w.RollStalls += o.RollStalls
	w.StickyFailures += o.StickyFailures
	if o.FsyncSeconds.Bounds != nil {
		w.FsyncSeconds.Add(o.FsyncSeconds)
	}
	if o.BatchRecords.Bounds != nil {
		w.BatchRecords.Add(o.BatchRecords)
	}
}

// addPushCounters adds the push outcome counters of b to a.
func addPushCounters(a *engine.PushStats, b engine.PushStats) {
	a.Delivered += b.Delivered
	a.Failed += b.Failed
	a.DeadLettered += b.DeadLettered
	a.Discarded += b.Discarded
}
