package engine

// Power-loss test: the engine and its storage lose power, and only what
// was made durable survives.
//
// The broker runs durable, with its log on a wal.MemFS and its index
// (Badger) in a real directory. A simulated power loss keeps:
//
//   - of the log, what MemFS.CrashClone keeps: every byte covered by a
//     completed fsync, plus a random prefix of the writes after it (the last
//     one possibly torn), and only directory entries made durable by a
//     directory sync;
//   - of the index, the last completed commit. Badger writes its own files,
//     so the test cannot drop its unsynced bytes at the file level. Instead
//     every index commit goes through Options.testCommit, which commits to
//     Badger and then takes a logical snapshot of the whole index (position,
//     metadata, queues, messages). A commit is durable when it returns
//     (SyncWrites and a directory sync; index/crash_test.go tests that at the
//     file level), so that snapshot is exactly what survives a power loss
//     until the next commit returns. A power loss *during* a commit is
//     simulated too: the commit's data survives with the previous position
//     (index invariant 2 allows exactly that), and the broker dies there.
//     After a power loss the index directory is replaced by one holding the
//     snapshot, and the broker is opened on it and on the cloned log.
//
// Load: one driver goroutine runs rounds of 1..4 concurrent operations
// (batch sends with all priorities and some delays, short-poll receives,
// deletes, visibility changes, Broker.Sync) on two queues, and now and
// then a purge of one of them alone in its round, and moves the
// fake clock between rounds (the checkpointer and the compactor run then,
// in the driver's goroutine). Power fails between rounds, in the middle of a
// round (while operations are in flight) or inside a checkpoint's commit.
//
// History checks after every restart, over the whole history (the kill -9
// test's, crash_test.go):
//   - no acknowledged send is lost (sync mode always);
//   - no message whose delete was acknowledged comes back (sync mode
//     always acknowledges a delete after its fsync);
//   - no acknowledged visibility change is undone: until its new
//     NextVisibleTime the message stays Inactive, and not visible earlier;
//   - no message that was never sent appears, and a body keeps the id its
//     send was acknowledged with, and an id the body it was acknowledged
//     with; MessageIds are unique;
//   - no DequeueCount goes below a durable one;
//   - the queues, whose creation is durable when acknowledged, exist;
//   - publishes (a quarter of the sends are publishes to a topic with a
//     SIMPLIFIED subscription per sink queue and one HTTP subscription
//     whose push queue is a sink too, never pushed; sinks are never
//     consumed): an
//     acknowledged publish is in every sink, any publish is in every sink
//     or in none, and never twice in one; the topic and its subscriptions,
//     durable when acknowledged, exist.
//   - a message that pl-a dead-lettered into pl-dlq (deadletter.go) counts
//     as the message it was sent as (DLQOriginMessageId): it is in exactly
//     one of the two queues, never lost, never in both.
//
// A receive counts as durable once a Broker.Sync that started after it was
// acknowledged has returned; sends, deletes and visibility changes once they
// are acknowledged.
//
// TestPowerLossCatchesNoopFsync runs the same harness with fdatasync turned
// into a no-op and must see it fail: that is what shows the test can.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

var errPowerLost = errors.New("power lost (simulated)")

// idxSnap is a logical copy of an index.
type idxSnap struct {
	pos    uint64
	hasPos bool
	meta   map[string][]byte
	queues map[uint64][]byte
	msgs   map[msgKey][]byte
	topics map[uint64][]byte
	subs   map[uint64][]byte
	counts map[uint64][]byte // topics' MessageCount (topic_count.go); missed until the topic model (2026-12-06)
}

// snapIndex copies everything idx holds.
func snapIndex(idx *index.Store) (*idxSnap, error) {
	s := &idxSnap{meta: map[string][]byte{}, queues: map[uint64][]byte{}, msgs: map[msgKey][]byte{},
		topics: map[uint64][]byte{}, subs: map[uint64][]byte{}, counts: map[uint64][]byte{}}
	var err error
	if s.pos, s.hasPos, err = idx.Position(); err != nil {
		return nil, err
	}
	for _, name := range []string{metaSecret, metaBoot, metaQueueID, metaTopicID, metaSubID} {
		v, err := idx.Meta(name)
		if err != nil {
			return nil, err
		}
		if v != nil {
			s.meta[name] = append([]byte(nil), v...)
		}
	}
	if err := idx.Queues(func(id uint64, v []byte) error {
		s.queues[id] = append([]byte(nil), v...)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := idx.Messages(func(qid, seq uint64, v []byte) error {
		s.msgs[msgKey{qid, seq}] = append([]byte(nil), v...)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := idx.Topics(func(id uint64, v []byte) error {
		s.topics[id] = append([]byte(nil), v...)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := idx.Subscriptions(func(id uint64, v []byte) error {
		s.subs[id] = append([]byte(nil), v...)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := idx.TopicCounts(func(id uint64, v []byte) error {
		s.counts[id] = append([]byte(nil), v...)
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// restore writes s into a new index in dir.
func (s *idxSnap) restore(dir string) error {
	idx, err := index.Open(dir, index.Options{})
	if err != nil {
		return err
	}
	b := idx.NewBatch()
	for k, v := range s.meta {
		b.PutMeta(k, v)
	}
	for id, v := range s.queues {
		b.PutQueue(id, v)
	}
	for k, v := range s.msgs {
		b.PutMessage(k.qid, k.seq, v)
	}
	for id, v := range s.topics {
		b.PutTopic(id, v)
	}
	for id, v := range s.subs {
		b.PutSubscription(id, v)
	}
	for id, v := range s.counts {
		b.PutTopicCount(id, v)
	}
	if s.hasPos {
		b.SetPosition(s.pos)
	}
	if err := idx.Commit(b); err != nil {
		idx.Close()
		return err
	}
	return idx.Close()
}

// noSyncFS is a wal.FS whose files' Sync does nothing: a broken fdatasync.
type noSyncFS struct{ wal.FS }

func (f noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

type noSyncFile struct{ wal.File }

func (noSyncFile) Sync() error { return nil }

// plHistory is what the clients of all incarnations saw.
type plHistory struct {
	mu         sync.Mutex
	attempted  map[string]bool   // tags sent (acknowledged or not)
	acked      map[string]string // tag -> id of acknowledged sends
	ackedTag   map[string]string // id -> tag
	deleted    map[string]bool   // ids a delete was tried on (it may have landed)
	durableDel map[string]bool   // ids whose delete is durable
	durableDq  map[string]int    // id -> DequeueCount known durable
	visAcked   map[string]int64  // id -> NextVisibleTime of its last acknowledged visibility change
	pending    []func()          // effects to make durable at the next Sync
	drained    int               // effects taken from pending so far (pending[0] is effect number drained)
	crashed    bool              // the current incarnation lost power
	ops        int
	pubTried   map[string]bool     // publish bodies tried (acknowledged or not)
	pubAcked   map[string]bool     // publish bodies acknowledged
	log        []string            // power losses
	trace      map[string][]string // id -> what happened to it, for failure reports
	alias      map[string]string   // id in pl-dlq -> the id it was sent with (DLQOriginMessageId)
	dlqSeen    int                 // dead-lettered messages seen (received or recovered)
	purges     int                 // purges acknowledged
}

func newPLHistory() *plHistory {
	return &plHistory{attempted: map[string]bool{}, acked: map[string]string{}, ackedTag: map[string]string{},
		deleted: map[string]bool{}, durableDel: map[string]bool{}, durableDq: map[string]int{}, visAcked: map[string]int64{}, trace: map[string][]string{},
		pubTried: map[string]bool{}, pubAcked: map[string]bool{}, alias: map[string]string{}}
}

// record runs f (an acknowledgement) unless power was lost before it.
func (h *plHistory) record(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.crashed {
		h.ops++
		f()
	}
}

// plRun is one run of the harness.
type plRun struct {
	t    testing.TB
	rnd  *rand.Rand // the driver's; each worker gets its own, seeded from it
	crnd *rand.Rand // guarded by h.mu: CrashClone's and the commit hook's
	clk  *FakeClock
	root string
	cfg  plConfig
	h    *plHistory

	inc     int // the incarnation: bumps at each restart
	fs      *wal.MemFS
	b       *Broker
	queues  []*Queue
	sinks   []*Queue   // the publish sinks (plTopic's subscriptions)
	live    bool       // guarded by h.mu: the incarnation is open and has power
	last    *idxSnap   // guarded by h.mu: the index as of its last completed commit
	lost    *wal.MemFS // the log's image at the power loss
	lostIdx *idxSnap   // the index's image at the power loss
	midCP   float64    // chance that a commit loses power after its data part
}

// open opens incarnation r.inc on r.fs and the index in its directory.
func (r *plRun) open() error {
	// No logger: a power loss makes the dead incarnation log failures that
	// are expected; the harness reports what matters.
	o := Options{Dir: r.root, Clock: r.clk, Stripes: 2}
	o.Push.Disabled = true // the HTTP subscription's push queue is a sink (openTopic)
	var fs wal.FS = r.fs
	if r.cfg.noSync {
		fs = noSyncFS{r.fs}
	}
	o.WAL.FS = fs
	o.WAL.Sync = SyncAlways
	o.WAL.SegmentBytes = 64 << 10
	o.WAL.BufferBytes = 256 << 10
	o.CheckpointRecords = 200
	o.CheckpointInterval = 2 * time.Second
	o.MaxReplayRecords = 800
	if r.cfg.noCheckpoints {
		o.CheckpointRecords, o.MaxReplayRecords = 1<<40, 1<<40
		o.CheckpointInterval = 24 * time.Hour
	}
	inc := r.inc
	o.testCommit = func(idx *index.Store, b *index.Batch) error {
		if inc != r.inc {
			return idx.Commit(b) // a dead incarnation's final commits
		}
		h := r.h
		h.mu.Lock()
		live := r.live
		crashMid := live && r.crnd.Float64() < r.midCP
		h.mu.Unlock()
		if err := idx.Commit(b); err != nil || (!live && r.inc > 0 && r.last != nil && h.crashed) {
			return err
		}
		s, err := snapIndex(idx)
		if err != nil {
			return err
		}
		if crashMid {
			h.mu.Lock()
			s.pos, s.hasPos = r.last.pos, r.last.hasPos
			h.mu.Unlock()
			r.powerLoss(s, "inside a checkpoint, after its data part")
			return errPowerLost
		}
		h.mu.Lock()
		if !h.crashed {
			r.last = s
		}
		h.mu.Unlock()
		return nil
	}
	b, err := Open(o)
	if err != nil {
		return err
	}
	r.b = b
	r.h.mu.Lock()
	r.live = true
	r.h.mu.Unlock()
	r.queues = r.queues[:0]
	// pl-a dead-letters into pl-dlq what was received once and comes back
	// (deadletter.go): moves join the history.
	for _, name := range []string{"pl-dlq", "pl-a", "pl-b"} {
		q, err := b.Queue(name)
		if r.inc > 0 && err != nil {
			return &plViolation{fmt.Sprintf("after power loss %d: queue %s lost: %v", r.inc, name, err)}
		}
		if q == nil {
			cfg := DefaultQueueConfig()
			cfg.VisibilityTimeout = 30 * time.Second
			if name == "pl-a" {
				cfg.VisibilityTimeout = 3 * time.Second
				cfg.DeadLetterQueue, cfg.MaxReceiveCount = "pl-dlq", 1
			}
			cfg.Retention = MaxRetention
			if _, err := b.CreateQueue(name, cfg); err != nil {
				return err
			}
			q, _ = b.Queue(name)
		}
		r.queues = append(r.queues, q)
	}
	return r.openTopic()
}

const plTopic = "pl-t"

// openTopic finds (first incarnation: makes) the sinks, the topic and its
// subscriptions, all durable once acknowledged.
func (r *plRun) openTopic() error {
	b := r.b
	if r.inc == 0 {
		if _, err := b.CreateTopic(plTopic, DefaultTopicConfig()); err != nil {
			return err
		}
	}
	r.sinks = r.sinks[:0]
	for _, name := range []string{"pl-s1", "pl-s2", "pl-s3"} {
		if r.inc == 0 {
			cfg := DefaultQueueConfig()
			cfg.Retention = MaxRetention
			if _, err := b.CreateQueue(name, cfg); err != nil {
				return err
			}
			sc := SubscriptionConfig{Endpoint: "acs:mns:r:a:queues/" + name, Format: FormatSimplified}
			if _, err := b.Subscribe(plTopic, "to-"+name, sc); err != nil {
				return err
			}
		}
		q, err := b.Queue(name)
		if err != nil {
			return fmt.Errorf("sink %s lost: %w", name, err)
		}
		if _, err := b.GetSubscriptionAttributes(plTopic, "to-"+name); err != nil {
			return fmt.Errorf("subscription to %s lost: %w", name, err)
		}
		r.sinks = append(r.sinks, q)
	}
	// An HTTP subscription, never pushed (Options.Push.Disabled): its push
	// queue is one more sink, in the same publish groups.
	if r.inc == 0 {
		if _, err := b.Subscribe(plTopic, "to-http", SubscriptionConfig{Endpoint: "http://127.0.0.1:1/", Format: FormatSimplified}); err != nil {
			return err
		}
	}
	t, err := b.topicByName(plTopic)
	if err != nil {
		return err
	}
	s, err := b.subByName(t, "to-http")
	if err != nil {
		return fmt.Errorf("HTTP subscription lost: %w", err)
	}
	q := b.internalQueue(pushQueueName(s.id))
	if q == nil {
		return errors.New("the HTTP subscription's push queue is lost")
	}
	r.sinks = append(r.sinks, q)
	return nil
}

// powerLoss takes the post-crash images: the log as CrashClone leaves it
// and the index as given (nil: as of its last completed commit).
// Acknowledgements after it do not count.
func (r *plRun) powerLoss(idx *idxSnap, where string) {
	h := r.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.crashed {
		return
	}
	h.crashed, r.live = true, false
	h.drained += len(h.pending)
	h.pending = nil // what no Sync covered died with the power
	r.lost = r.fs.CrashClone(r.crnd)
	if idx == nil {
		idx = r.last
	}
	r.lostIdx = idx
	h.log = append(h.log, fmt.Sprintf("inc %d: power lost %s after %d acknowledged operations", r.inc, where, h.ops))
}

// restart opens the next incarnation on the images of the power loss and
// checks the history against what it recovered.
func (r *plRun) restart() error {
	old := r.b
	old.Close() // its writes go to the old images, which are discarded
	r.inc++
	r.fs = r.lost
	dir := filepath.Join(r.root, "index")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := r.lostIdx.restore(dir); err != nil {
		return fmt.Errorf("restore index: %w", err)
	}
	r.h.mu.Lock()
	r.h.crashed = false
	r.last = r.lostIdx
	r.h.mu.Unlock()
	if err := r.open(); err != nil {
		if v := (*plViolation)(nil); errors.As(err, &v) {
			return err
		}
		return &plRefused{err}
	}
	return r.check()
}

// plRefused: the broker did not open after a power loss.
type plRefused struct{ err error }

func (e *plRefused) Error() string { return "reopen after power loss: " + e.err.Error() }
func (e *plRefused) Unwrap() error { return e.err }

// plViolation: what the broker recovered contradicts the history.
type plViolation struct{ msg string }

func (e *plViolation) Error() string { return e.msg }

// check compares the recovered state with the history.
func (r *plRun) check() error {
	h := r.h
	present := map[string]bool{}
	var problems []string
	now := r.clk.Now().UnixMilli()
	presentID := map[string]bool{}
	for _, q := range r.queues {
		err := dumpQueueMsgs(q, func(mid MessageID, m *Message, state string, dq uint32, visible int64) {
			id, tag := mid.String(), string(m.Body)
			// A dead-lettered message counts as the message it was sent as
			// (its DLQOriginMessageId): in both queues is twice, in neither
			// is lost.
			origin := id
			if v, ok := sysProp(m, SysDLQOriginMessageID); ok {
				origin = v
				h.alias[id] = origin
				h.dlqSeen++
			}
			if v, ok := h.visAcked[id]; ok && (state == "Active" && now < v || state == "Inactive" && visible < v) {
				problems = append(problems, fmt.Sprintf("message %s is %s with NextVisibleTime %d at %d, but a visibility change to %d was acknowledged; its history:\n  %s",
					id, state, visible, now, v, strings.Join(h.trace[id], "\n  ")))
			}
			if present[origin] {
				problems = append(problems, fmt.Sprintf("message %s twice (in %s as %s, and once more)", origin, q.name, id))
			}
			present[origin], presentID[id] = true, true
			if !h.attempted[tag] {
				problems = append(problems, fmt.Sprintf("message %s with body %q that was never sent", id, tag))
			}
			if known, ok := h.acked[tag]; ok && known != origin {
				problems = append(problems, fmt.Sprintf("body %q has id %s (sent as %s), acknowledged as %s", tag, id, origin, known))
			}
			if known, ok := h.ackedTag[id]; ok && known != tag {
				problems = append(problems, fmt.Sprintf("message %s has body %q, acknowledged with body %q", id, tag, known))
			}
			if h.durableDel[id] || h.durableDel[origin] {
				problems = append(problems, fmt.Sprintf("message %s came back after its delete was durable", id))
			}
			if want := h.durableDq[id]; int(dq) < want {
				problems = append(problems, fmt.Sprintf("message %s DequeueCount %d below the durable %d; its history:\n  %s",
					id, dq, want, strings.Join(h.trace[id], "\n  ")))
			}
			h.trace[id] = append(h.trace[id], fmt.Sprintf("inc %d: recovered %s dq %d", r.inc, state, dq))
			h.durableDq[id] = max(h.durableDq[id], int(dq))
		})
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	for tag, id := range h.acked {
		if !present[id] && !h.deleted[id] {
			problems = append(problems, fmt.Sprintf("acknowledged message %s (%s) lost", id, tag))
		}
	}
	problems = append(problems, r.checkPublishes()...)
	// A delete that did not survive may be made again.
	for id := range h.deleted {
		if present[id] || presentID[id] {
			delete(h.deleted, id)
		}
	}
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("... and %d more", len(problems)-10))
		}
		return &plViolation{fmt.Sprintf("after power loss %d: %s\nrun log:\n%s", r.inc, strings.Join(problems, "\n"),
			strings.Join(h.log[max(0, len(h.log)-20):], "\n"))}
	}
	return nil
}

// held is a received message a later round may delete or change.
type held struct {
	q  *Queue
	h  ReceiptHandle
	id string
}

// round runs 1..4 operations concurrently, each with its own generator,
// or now and then a purge of pl-b alone; it reports which.
func (r *plRun) round(n int, pool *[]held, poolMu *sync.Mutex) (purged bool) {
	if r.rnd.IntN(40) == 0 {
		r.purge(r.queues[2])
		return true
	}
	var wg sync.WaitGroup
	k := 1 + r.rnd.IntN(4)
	for w := 0; w < k; w++ {
		wg.Add(1)
		op, q := r.rnd.IntN(100), r.queues[r.rnd.IntN(len(r.queues))]
		wr := rand.New(rand.NewPCG(r.rnd.Uint64(), uint64(w)))
		go func(w int) {
			defer wg.Done()
			switch {
			case op < 40 && wr.IntN(4) == 0:
				r.publish(fmt.Sprintf("p-i%d-r%d-w%d", r.inc, n, w))
			case op < 40:
				r.send(wr, q, fmt.Sprintf("i%d-r%d-w%d", r.inc, n, w))
			case op < 70:
				r.receive(wr, q, pool, poolMu)
			case op < 90:
				r.deleteOrChange(wr, pool, poolMu)
			default:
				r.sync()
			}
		}(w)
	}
	wg.Wait()
	return false
}

// publish publishes body to the topic: one message in each sink, or none.
func (r *plRun) publish(body string) {
	h := r.h
	h.mu.Lock()
	h.pubTried[body] = true
	h.mu.Unlock()
	if _, err := r.b.Publish(plTopic, PublishInput{Body: []byte(body)}); err != nil {
		return
	}
	h.record(func() { h.pubAcked[body] = true })
}

// checkPublishes checks the sinks against the publish history.
func (r *plRun) checkPublishes() []string {
	h := r.h
	var problems []string
	in := map[string]int{} // body -> sinks holding it
	for _, q := range r.sinks {
		seen := map[string]bool{}
		err := dumpQueue(q, func(mid MessageID, body []byte, _ string, _ uint32, _ int64) {
			if isInternalQueue(q.name) {
				env, err := decodePushEnvelope(body)
				if err != nil {
					problems = append(problems, fmt.Sprintf("push queue %s: %v", q.name, err))
					return
				}
				body = env.body
			}
			b := string(body)
			switch {
			case !h.pubTried[b]:
				problems = append(problems, fmt.Sprintf("sink %s holds %q, never published", q.name, b))
			case seen[b]:
				problems = append(problems, fmt.Sprintf("sink %s holds %q twice", q.name, b))
			}
			seen[b] = true
			in[b]++
		})
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	for b, n := range in {
		if n != len(r.sinks) {
			problems = append(problems, fmt.Sprintf("publish %q is in %d of %d sinks", b, n, len(r.sinks)))
		}
	}
	for b := range h.pubAcked {
		if in[b] != len(r.sinks) {
			problems = append(problems, fmt.Sprintf("acknowledged publish %q lost (in %d of %d sinks)", b, in[b], len(r.sinks)))
		}
	}
	return problems
}

func (r *plRun) send(wr *rand.Rand, q *Queue, prefix string) {
	h := r.h
	entries := make([]SendEntry, 1+wr.IntN(MaxBatch))
	for i := range entries {
		entries[i] = SendEntry{Body: []byte(fmt.Sprintf("%s-%d", prefix, i)), Priority: 1 + wr.IntN(16)}
		if wr.IntN(5) == 0 {
			entries[i].Delay, entries[i].HasDelay = time.Duration(wr.IntN(4000))*time.Millisecond, true
		}
	}
	h.mu.Lock()
	for _, e := range entries {
		h.attempted[string(e.Body)] = true
	}
	h.mu.Unlock()
	res, err := q.Send(entries, nil)
	if err != nil {
		return
	}
	h.record(func() {
		for i := range res {
			id, tag := res[i].ID.String(), string(entries[i].Body)
			h.acked[tag], h.ackedTag[id] = id, tag
		}
	})
}

func (r *plRun) receive(wr *rand.Rand, q *Queue, pool *[]held, poolMu *sync.Mutex) {
	msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: 1 + wr.IntN(MaxBatch), HasWait: true}, nil)
	if err != nil {
		return
	}
	h := r.h
	h.mu.Lock()
	for _, m := range msgs {
		if v, ok := sysProp(&m, SysDLQOriginMessageID); ok {
			h.alias[m.ID.String()] = v
			h.dlqSeen++
		}
	}
	h.mu.Unlock()
	h.record(func() {
		for _, m := range msgs {
			id, dq := m.ID.String(), m.DequeueCount
			delete(h.visAcked, id) // visible again, as it may be
			h.trace[id] = append(h.trace[id], fmt.Sprintf("inc %d: received dq %d", r.inc, dq))
			h.pending = append(h.pending, func() {
				h.durableDq[id] = max(h.durableDq[id], dq)
				h.trace[id] = append(h.trace[id], fmt.Sprintf("inc %d: dq %d durable", r.inc, dq))
			})
		}
	})
	poolMu.Lock()
	for _, m := range msgs {
		*pool = append(*pool, held{q, m.Handle, m.ID.String()})
	}
	poolMu.Unlock()
}

// take removes up to n random entries of one queue from the pool.
func take(wr *rand.Rand, pool *[]held, poolMu *sync.Mutex, n int) []held {
	poolMu.Lock()
	defer poolMu.Unlock()
	var out []held
	for len(out) < n && len(*pool) > 0 {
		i := wr.IntN(len(*pool))
		m := (*pool)[i]
		if len(out) > 0 && m.q != out[0].q {
			break
		}
		out = append(out, m)
		(*pool)[i] = (*pool)[len(*pool)-1]
		*pool = (*pool)[:len(*pool)-1]
	}
	return out
}

func (r *plRun) deleteOrChange(wr *rand.Rand, pool *[]held, poolMu *sync.Mutex) {
	h := r.h
	if wr.IntN(5) == 0 {
		for _, m := range take(wr, pool, poolMu, 1) {
			// A change may reach the log even if power fails before it is
			// acknowledged (or before its acknowledgement is recorded): from
			// here on an earlier acknowledged change's NextVisibleTime may
			// be replaced by this one's, which can be earlier. The model
			// kept the earlier bound, and reported such a change as an
			// acknowledged one undone: the likely cause of seed 13's one
			// failure in stop 69's long run (never reproduced).
			d := time.Duration(1+wr.IntN(30)) * time.Second
			h.mu.Lock()
			before, had := h.visAcked[m.id]
			delete(h.visAcked, m.id)
			h.trace[m.id] = append(h.trace[m.id], fmt.Sprintf("inc %d: visibility change of %v at %d tried", r.inc, d, r.clk.Now().UnixMilli()))
			h.mu.Unlock()
			nh, next, err := m.q.ChangeVisibility(m.h, d)
			if err != nil && had {
				h.record(func() { h.visAcked[m.id] = before }) // refused, with the power on: nothing changed
			}
			if err == nil {
				h.record(func() {
					h.visAcked[m.id] = next.UnixMilli()
					h.trace[m.id] = append(h.trace[m.id], fmt.Sprintf("inc %d: visibility change to %d acknowledged", r.inc, next.UnixMilli()))
				})
				poolMu.Lock()
				*pool = append(*pool, held{m.q, nh, m.id})
				poolMu.Unlock()
			}
		}
		return
	}
	ms := take(wr, pool, poolMu, 1+wr.IntN(MaxBatch))
	if len(ms) == 0 {
		return
	}
	hs := make([]ReceiptHandle, len(ms))
	for i := range ms {
		hs[i] = ms[i].h
	}
	// A delete may reach the log even if power fails before it is
	// acknowledged: from here on the message may be gone.
	h.mu.Lock()
	for _, m := range ms {
		h.deleted[m.id] = true
		if o, ok := h.alias[m.id]; ok {
			h.deleted[o] = true // the message it was sent as
		}
	}
	h.mu.Unlock()
	errs := make([]error, len(ms))
	if _, err := ms[0].q.Delete(hs, errs); err != nil {
		return
	}
	h.record(func() {
		for i, m := range ms {
			if errs[i] == nil {
				h.trace[m.id] = append(h.trace[m.id], fmt.Sprintf("inc %d: deleted", r.inc))
				h.durableDel[m.id] = true
				if o, ok := h.alias[m.id]; ok {
					h.durableDel[o] = true
				}
				delete(h.visAcked, m.id)
			}
		}
	})
}

// purge purges q (pl-b, which no dead-letter move enters or leaves),
// alone in its round, so that it takes exactly the messages it finds: each
// may be gone from the call on, and is gone for good (a durable delete)
// once it returns.
func (r *plRun) purge(q *Queue) {
	h := r.h
	var ids []string
	if err := dumpQueueMsgs(q, func(id MessageID, _ *Message, _ string, _ uint32, _ int64) { ids = append(ids, id.String()) }); err != nil {
		return
	}
	h.mu.Lock()
	for _, id := range ids {
		h.deleted[id] = true
	}
	h.mu.Unlock()
	n, err := q.Purge()
	if err != nil {
		return
	}
	h.record(func() {
		if n != len(ids) {
			r.t.Errorf("inc %d: purge of %s took %d messages, %d were there", r.inc, q.name, n, len(ids))
		}
		h.purges++
		for _, id := range ids {
			h.durableDel[id] = true
			delete(h.visAcked, id)
			h.trace[id] = append(h.trace[id], fmt.Sprintf("inc %d: purged", r.inc))
		}
	})
}

// sync makes every operation acknowledged before it durable.
func (r *plRun) sync() {
	h := r.h
	h.mu.Lock()
	upto := h.drained + len(h.pending)
	h.mu.Unlock()
	if r.b.Sync() != nil {
		return
	}
	h.record(func() {
		n := upto - h.drained // another Sync may have drained some already
		for _, f := range h.pending[:max(n, 0)] {
			f()
		}
		if n > 0 {
			h.pending = h.pending[n:]
			h.drained += n
		}
	})
}

// plConfig varies the harness.
type plConfig struct {
	noSync        bool // fdatasync does nothing
	noCheckpoints bool // no periodic checkpoints: only the one after each start (recovery.go)
}

// runPowerLoss runs crashes power losses with seed and returns the first
// history violation.
func runPowerLoss(t testing.TB, seed uint64, crashes int, cfg plConfig) error {
	r := &plRun{t: t, rnd: rand.New(rand.NewPCG(seed, 1)), crnd: rand.New(rand.NewPCG(seed, 2)),
		clk: NewFakeClock(t0), root: t.TempDir(), cfg: cfg, h: newPLHistory(), fs: wal.NewMemFS(), midCP: 0.05}
	if err := r.open(); err != nil {
		return err
	}
	defer func() { r.b.Close() }()
	var pool []held
	var poolMu sync.Mutex
	for c := 0; c < crashes; c++ {
		rounds := 5 + r.rnd.IntN(40)
		mid := r.rnd.IntN(3) == 0 // lose power while the last round is in flight
		for n := 0; n < rounds && !r.crashedNow(); n++ {
			if mid && n == rounds-1 {
				var wg sync.WaitGroup
				wg.Add(1)
				spins := r.rnd.IntN(200)
				go func() {
					defer wg.Done()
					for i := spins; i > 0; i-- {
						runtime.Gosched()
					}
					r.powerLoss(nil, "while operations were in flight")
				}()
				r.round(n, &pool, &poolMu)
				wg.Wait()
				break
			}
			if r.round(n, &pool, &poolMu) && r.rnd.IntN(2) == 0 {
				break // power fails right after a purge acknowledged
			}
			r.clk.Advance(time.Duration(r.rnd.IntN(1500)) * time.Millisecond)
		}
		r.powerLoss(nil, "between rounds")
		pool = pool[:0] // handles of the dead incarnation may work again after restart; not needed
		if err := r.restart(); err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
	}
	t.Logf("seed %d: %d power losses, %d acknowledged sends, %d deletes tried (%d durable), %d publishes tried (%d acknowledged), %d dead-lettered messages seen, %d purges",
		seed, crashes, len(r.h.acked), len(r.h.deleted), len(r.h.durableDel), len(r.h.pubTried), len(r.h.pubAcked), r.h.dlqSeen, r.h.purges)
	if r.h.dlqSeen == 0 && !cfg.noSync {
		return fmt.Errorf("seed %d: no message was dead-lettered: the run does not cover moves", seed)
	}
	return nil
}

func (r *plRun) crashedNow() bool {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.h.crashed
}

// TestPowerLoss: at least 20 power losses in make test, 500 in make
// test-long, under mixed load; the whole history must hold after each.
func TestPowerLoss(t *testing.T) {
	seeds, crashes := []uint64{1, 2}, 12
	if modelLong {
		seeds, crashes = []uint64{11, 12, 13, 14, 15}, 100
	}
	for _, seed := range seedsFromEnv(t, seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if err := runPowerLoss(t, seed, crashes, plConfig{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPowerLossCatchesNoopFsync: with fdatasync a no-op, what was
// acknowledged is lost at a power loss, and the harness must say so. How
// it shows depends on where the power fails, which the concurrent rounds
// make vary from run to run (counts from 32 runs of each case, at
// b11741c):
//   - with checkpoints, the index (which syncs itself) checkpoints log
//     positions that did not survive, and the broker refuses to start
//     ("the index checkpoint ... is beyond the end of the log"): 28 of 32;
//     a loss the index did not get ahead of is seen by the history check
//     (4 of 32);
//   - with periodic checkpoints off (log only), a segment that lost its
//     tail while a later one kept its head leaves a hole mid-log, and the
//     broker refuses to start on a corrupt record (wal.ErrCorrupt): 30 of
//     32; otherwise the history check sees the loss (2 of 32). The index
//     is not quite empty there: each start checkpoints the tail it
//     replayed (recovery.go), and when the power fails soon after, that
//     checkpoint can be ahead of the log too (once in a CI run, none of
//     these 32).
//
// Any other outcome (it passes, or fails for another reason) fails.
func TestPowerLossCatchesNoopFsync(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  plConfig
		ok   []string // the outcomes that show the loss
	}{
		{"with-checkpoints", plConfig{noSync: true}, []string{plIndexAhead, plCorrupt, plViolated}},
		{"log-only", plConfig{noSync: true, noCheckpoints: true}, []string{plViolated, plCorrupt, plIndexAhead}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := runPowerLoss(t, 7, 20, c.cfg)
			if err == nil {
				t.Fatal("the power-loss harness passed with fdatasync turned into a no-op")
			}
			kind := plOutcome(err)
			if !slices.Contains(c.ok, kind) {
				t.Fatalf("failed, but not by showing the loss (%s; want one of %v): %v", kind, c.ok, err)
			}
			t.Logf("%s: caught, as it must be (%s): %v", c.name, kind, firstLine(err.Error()))
		})
	}
}

// Outcomes of a failed power-loss run.
const (
	plViolated   = "history violation"
	plIndexAhead = "refused to start: the index is ahead of the log"
	plCorrupt    = "refused to start: the log is corrupt"
	plOther      = "another failure"
)

func plOutcome(err error) string {
	var v *plViolation
	var ref *plRefused
	switch {
	case errors.As(err, &v):
		return plViolated
	case !errors.As(err, &ref):
		return plOther
	case errors.Is(err, wal.ErrCorrupt):
		return plCorrupt
	case strings.Contains(err.Error(), "is beyond the end of the log"):
		return plIndexAhead
	}
	return plOther
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
