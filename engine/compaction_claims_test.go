package engine

// The disk-use claim of docs/operations.md ("Disk use") and of
// docs/architecture.md ("Compaction"), checked on the patterns the
// adversaries of compaction_test.go leave out: topic fan-out (queue and
// HTTP subscriptions, pushes with retries pending), dead-letter moves,
// visibility changed again and again, queues deleted or purged while
// holding messages, many queues with one old message each, priority mixes,
// long polls, short retention and attribute changes, and a kill -9 in the
// middle of a rewrite (docs audit "diskuse", 2026-12-07).
//
// Each test checks the bound (held <= 2 x live + 2 segments once
// compacted), that the live counters agree with the messages (the sum of
// every segment's live bytes is the sum of every message's record size: a
// body counted and never released pins its segment for good), and that
// every message of every queue (internal push queues too) reads back with
// its MD5, exactly once.

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// claimBroker opens an in-memory broker, or a durable one in a new
// directory when the test name ends in "durable", with 64 KiB segments
// and the pusher disabled (mod changes the options). It returns the
// directory ("" in memory).
func claimBroker(t *testing.T, mod func(*Options)) (*Broker, *FakeClock, string) {
	t.Helper()
	clk := NewFakeClock(t0)
	if strings.HasSuffix(t.Name(), "durable") {
		dir := t.TempDir()
		b := openDurableTest(t, dir, clk, claimOptions(mod))
		t.Cleanup(func() { b.Close() })
		return b, clk, dir
	}
	o := Options{MemSegmentBytes: 64 << 10, Stripes: 2}
	o.Push.Disabled = true
	if mod != nil {
		mod(&o)
	}
	b, clk := openTest(t, o)
	return b, clk, ""
}

// claimOptions are claimBroker's durable options.
func claimOptions(mod func(*Options)) func(*Options) {
	return func(o *Options) {
		o.WAL.SegmentBytes = 64 << 10
		o.WAL.Sync = wal.SyncNone
		o.Push.Disabled = true
		if mod != nil {
			mod(o)
		}
	}
}

func claimQueue(t *testing.T, b *Broker, name string, mod func(*QueueConfig)) *Queue {
	t.Helper()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = 10 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	return mustQueue(t, b, name, cfg)
}

// claimAudit reads every message of every queue of b (push queues too)
// back from the log and returns the MD5 of its body and properties by
// queue name and MessageId. It fails on a body that does not read or
// match its MD5, on a MessageId held twice, and when the segments' live
// bytes are not the sum of the messages' record sizes.
func claimAudit(t *testing.T, b *Broker) map[string]map[string][16]byte {
	t.Helper()
	b.mu.RLock()
	qs := make([]*Queue, 0, len(b.byID))
	for _, q := range b.byID {
		qs = append(qs, q)
	}
	b.mu.RUnlock()
	out := map[string]map[string][16]byte{}
	r := b.getReader()
	defer b.putReader(r)
	var held int64
	for _, q := range qs {
		got := map[string][16]byte{}
		out[q.name] = got
		for si := range q.stripes {
			st := &q.stripes[si]
			var locs []bodyLoc
			st.mu.Lock()
			for i := uint32(0); !st.dead && i < st.slab.n; i++ {
				if !st.slab.valid(i) {
					i = nextChunk(i) - 1
					continue
				}
				s := st.slab.at(i)
				if s.seq == 0 || s.state() == stFree || s.state() == stPending {
					continue
				}
				held += int64(s.recSize)
				locs = append(locs, bodyLoc{pos: s.bodyPos, size: s.recSize, slot: i, seq: s.seq, stripe: st.idx})
			}
			st.mu.Unlock()
			for i := range locs {
				var m Message
				ok, err := q.readBody(r, &m, &locs[i])
				if err != nil || !ok {
					t.Fatalf("queue %s message %s (body at %d): read %v %v", q.name, q.messageID(locs[i].seq), locs[i].pos, ok, err)
				}
				if md5.Sum(m.Body) != m.MD5 {
					t.Fatalf("queue %s message %s: body does not match its MD5", q.name, q.messageID(locs[i].seq))
				}
				id := q.messageID(locs[i].seq).String()
				if _, dup := got[id]; dup {
					t.Fatalf("queue %s holds message %s twice", q.name, id)
				}
				got[id] = md5.Sum(append(append([]byte(nil), m.Body...), m.props...))
			}
		}
		checkInvariants(t, q)
	}
	var live int64
	for _, s := range b.store.segments(nil) {
		live += s.live
	}
	if live != held {
		t.Fatalf("segments count %d live bytes, the messages hold %d", live, held)
	}
	return out
}

// checkClaim compacts b, then checks the bound, the live counters and
// every body and its properties (claimAudit: the same before and after),
// and returns what claimAudit found.
func checkClaim(t *testing.T, b *Broker, name string) map[string]map[string][16]byte {
	t.Helper()
	before := claimAudit(t, b)
	compactAll(t, b)
	held, live, seg := storeUsage(b)
	t.Logf("%s: held %d bytes, live %d bytes, segment %d; %+v", name, held, live, seg, b.Stats().Storage.Compaction)
	if held > 2*live+2*seg {
		t.Fatalf("%s: held %d > 2 x live %d + 2 x segment %d", name, held, live, seg)
	}
	after := claimAudit(t, b)
	for qn, msgs := range before {
		if len(after[qn]) != len(msgs) {
			t.Fatalf("%s: queue %s held %d messages before compaction, %d after", name, qn, len(msgs), len(after[qn]))
		}
		for id, sum := range msgs {
			if got, ok := after[qn][id]; !ok || got != sum {
				t.Fatalf("%s: queue %s message %s lost or changed by compaction (found %v)", name, qn, id, ok)
			}
		}
	}
	return after
}

func claimBody(tag string, i, size int) []byte {
	b := []byte(fmt.Sprintf("m-%s-%d-", tag, i))
	for len(b) < size {
		b = append(b, 'm')
	}
	return b
}

// receiveN receives up to n visible messages of q (fewer if there are not
// so many).
func receiveN(t *testing.T, q *Queue, n int) []Message {
	t.Helper()
	var out []Message
	for len(out) < n {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: min(n-len(out), MaxBatch), HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) || (err == nil && len(msgs) == 0) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs...)
	}
	return out
}

func deleteAll(t *testing.T, q *Queue, msgs []Message) {
	t.Helper()
	for len(msgs) > 0 {
		n := min(len(msgs), MaxBatch)
		hs := make([]ReceiptHandle, n)
		for i := range hs {
			hs[i] = msgs[i].Handle
		}
		errs := make([]error, n)
		if f, err := q.Delete(hs, errs); f != 0 || err != nil {
			t.Fatal(f, err, errs)
		}
		msgs = msgs[n:]
	}
}

// A topic fans each publish out to three queue subscriptions and an HTTP
// one (pusher off: its notifications wait); each queue keeps one delivery
// in ten and drains the rest, the HTTP subscription gets only the tagged
// publishes.
func TestCompactionClaimTopicFanout(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, _ := claimBroker(t, nil)
		if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
			t.Fatal(err)
		}
		var qs []*Queue
		for i := 0; i < 3; i++ {
			qs = append(qs, claimQueue(t, b, fmt.Sprintf("fan%d", i), nil))
			if _, err := b.Subscribe("t", fmt.Sprintf("s%d", i), SubscriptionConfig{Endpoint: qEndpoint(fmt.Sprintf("fan%d", i))}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Subscribe("t", "http", SubscriptionConfig{Endpoint: "http://127.0.0.1:1/push", FilterTag: "keep"}); err != nil {
			t.Fatal(err)
		}
		kept := 0
		for round := 0; round < 60; round++ {
			for i := 0; i < 10; i++ {
				in := PublishInput{Body: claimBody("pub", round*10+i, 900)}
				if round%6 == 0 && i == 0 {
					in.Tag = "keep"
				}
				if _, err := b.Publish("t", in); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range qs {
				msgs := receiveN(t, q, 10)
				if len(msgs) != 10 {
					t.Fatalf("round %d: %d deliveries in %s", round, len(msgs), q.name)
				}
				// Keep one (it stays Inactive, then visible, never deleted).
				deleteAll(t, q, msgs[1:])
			}
			kept++
		}
		got := checkClaim(t, b, "fanout")
		for _, q := range qs {
			if len(got[q.name]) != kept {
				t.Fatalf("%s holds %d deliveries, want %d", q.name, len(got[q.name]), kept)
			}
		}
		push := got[pushQueueName(subID(t, b, "t", "http"))]
		if len(push) != 10 {
			t.Fatalf("the HTTP subscription's push queue holds %d notifications, want 10", len(push))
		}
	})
}

// Messages moved to a dead-letter queue (one record holds the move) and
// kept there, one per round, while everything else churns.
func TestCompactionClaimDeadLetterMoves(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, _ := claimBroker(t, nil)
		dlq := claimQueue(t, b, "dlq", func(c *QueueConfig) { c.VisibilityTimeout = 12 * time.Hour })
		src := claimQueue(t, b, "src", func(c *QueueConfig) { c.DeadLetterQueue = "dlq"; c.MaxReceiveCount = 1 })
		rounds := 40
		for round := 0; round < rounds; round++ {
			for i := 0; i < 40; i++ {
				if _, err := src.Send([]SendEntry{{Body: claimBody("dl", round*40+i, 1000)}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if got := receiveN(t, src, 40); len(got) != 40 {
				t.Fatalf("round %d: received %d", round, len(got))
			}
			clk.Advance(11 * time.Second)
			if got := receiveN(t, src, 40); len(got) != 0 {
				t.Fatalf("round %d: %d messages received past their MaxReceiveCount", round, len(got))
			}
			moved := receiveN(t, dlq, 40)
			if len(moved) != 40 {
				t.Fatalf("round %d: %d messages in the dead-letter queue, want 40", round, len(moved))
			}
			deleteAll(t, dlq, moved[1:]) // the first stays, Inactive for 12 h
		}
		got := checkClaim(t, b, "deadletter")
		if len(got["dlq"]) != rounds || len(got["src"]) != 0 {
			t.Fatalf("dlq holds %d, src %d; want %d and 0", len(got["dlq"]), len(got["src"]), rounds)
		}
		if st := b.Stats().Storage.Compaction; st.Relocated == 0 {
			t.Fatalf("nothing relocated: the test no longer pins segments with dead letters (%+v)", st)
		}
	})
}

// Messages kept in flight for the whole run by ChangeMessageVisibility,
// over and over, one more each round (so one in every segment), while
// others churn; their handles still work after compaction moved their
// bodies, and once they are deleted the log shrinks to its last segments.
func TestCompactionClaimVisibilityChangedAgainAndAgain(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, _ := claimBroker(t, nil)
		q := claimQueue(t, b, "c", nil)
		var held []Message
		rounds := 60
		for round := 0; round < rounds; round++ {
			if _, err := q.Send([]SendEntry{{Body: claimBody("held", round, 1000)}}, nil); err != nil {
				t.Fatal(err)
			}
			m := receiveN(t, q, 1)
			if len(m) != 1 || !strings.HasPrefix(string(m[0].Body), "m-held-") {
				t.Fatalf("round %d: received %d", round, len(m))
			}
			held = append(held, m[0])
			sendN(t, q, 60, 1000, 0)
			drain(t, q, 60)
			for i := range held {
				h, _, err := q.ChangeVisibility(held[i].Handle, 30*time.Second)
				if err != nil {
					t.Fatalf("round %d: change visibility of %s: %v", round, held[i].ID, err)
				}
				held[i].Handle = h
			}
			clk.Advance(5 * time.Second)
			if round%20 == 19 {
				compactAll(t, b) // relocated while in flight
			}
		}
		got := checkClaim(t, b, "visibility")
		if len(got["c"]) != rounds {
			t.Fatalf("%d messages left, want the %d held", len(got["c"]), rounds)
		}
		for i := range held {
			h, _, err := q.ChangeVisibility(held[i].Handle, time.Minute)
			if err != nil {
				t.Fatalf("handle of %s after compaction: %v", held[i].ID, err)
			}
			held[i].Handle = h
		}
		deleteAll(t, q, held)
		got = checkClaim(t, b, "visibility, deleted")
		if len(got["c"]) != 0 {
			t.Fatal(len(got["c"]))
		}
	})
}

// Queues deleted while they hold messages (Active, Inactive, Delayed),
// and queues purged: nothing of theirs stays counted, nothing comes back
// after a restart (durable), not even in a queue created again under the
// same name.
func TestCompactionClaimDeletedAndPurgedQueues(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, dir := claimBroker(t, nil)
		keep := claimQueue(t, b, "keep", nil)
		for round := 0; round < 12; round++ {
			name := fmt.Sprintf("gone%d", round%3)
			q, err := b.Queue(name)
			if err != nil {
				q = claimQueue(t, b, name, nil)
			}
			p := claimQueue(t, b, fmt.Sprintf("purged%d", round), nil)
			for i := 0; i < 30; i++ {
				e := SendEntry{Body: claimBody(name, round*30+i, 1000)}
				if i%3 == 0 {
					e.Delay, e.HasDelay = time.Hour, true
				}
				if _, err := q.Send([]SendEntry{e}, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := p.Send([]SendEntry{e}, nil); err != nil {
					t.Fatal(err)
				}
			}
			_ = receiveN(t, q, 5) // some Inactive
			_ = receiveN(t, p, 5)
			if _, err := keep.Send([]SendEntry{{Body: claimBody("keep", round, 1000)}}, nil); err != nil {
				t.Fatal(err)
			}
			if n, err := p.Purge(); err != nil || n != 30 {
				t.Fatalf("purge: %d %v", n, err)
			}
			if round%3 == 2 {
				for i := 0; i < 3; i++ {
					if err := b.DeleteQueue(fmt.Sprintf("gone%d", i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			clk.Advance(time.Second)
		}
		got := checkClaim(t, b, "deleted")
		total := 0
		for name, msgs := range got {
			total += len(msgs)
			if name != "keep" && len(msgs) != 0 {
				t.Fatalf("%s holds %d messages", name, len(msgs))
			}
		}
		if total != 12 || len(got["keep"]) != 12 {
			t.Fatalf("%d messages in all, %d in keep; want 12, 12", total, len(got["keep"]))
		}
		if dir == "" {
			return
		}
		// A restart brings back none of what was deleted or purged.
		b.Close()
		b = openDurableTest(t, dir, clk, claimOptions(nil))
		t.Cleanup(func() { b.Close() })
		claimQueue(t, b, "gone0", nil) // the name again: a new, empty queue
		after := checkClaim(t, b, "deleted, restarted")
		for name, msgs := range after {
			if name != "keep" && len(msgs) != 0 {
				t.Fatalf("after a restart %s holds %d messages", name, len(msgs))
			}
		}
		if len(after["keep"]) != 12 {
			t.Fatalf("after a restart keep holds %d messages, want 12", len(after["keep"]))
		}
	})
}

// Many queues each hold one old message (nobody reads them), of every
// priority, while one queue churns with a priority mix whose lowest
// priority is left behind every round.
func TestCompactionClaimManyQueuesAndPriorities(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, _ := claimBroker(t, nil)
		c := claimQueue(t, b, "c", nil)
		rnd := rand.New(rand.NewPCG(3, 3))
		rounds := 40
		for round := 0; round < rounds; round++ {
			q := claimQueue(t, b, fmt.Sprintf("idle%d", round), nil)
			if _, err := q.Send([]SendEntry{{Body: claimBody("idle", round, 1000), Priority: 1 + round%16}}, nil); err != nil {
				t.Fatal(err)
			}
			var es []SendEntry
			for i := 0; i < 60; i++ {
				es = append(es, SendEntry{Body: claimBody("hi", round*64+i, 1000), Priority: 1 + rnd.IntN(8)})
			}
			for i := 0; i < 4; i++ {
				es = append(es, SendEntry{Body: claimBody("lo", round*64+i, 1000), Priority: MaxPriority})
			}
			rnd.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
			for i := range es {
				if _, err := c.Send(es[i:i+1], nil); err != nil {
					t.Fatal(err)
				}
			}
			msgs := receiveN(t, c, 60) // the 60 of priorities 1-8 first
			for _, m := range msgs {
				if m.Priority == MaxPriority {
					t.Fatalf("round %d: a priority %d message received before higher ones", round, m.Priority)
				}
			}
			deleteAll(t, c, msgs)
		}
		got := checkClaim(t, b, "priorities")
		if len(got["c"]) != 4*rounds {
			t.Fatalf("c holds %d, want %d", len(got["c"]), 4*rounds)
		}
		for round := 0; round < rounds; round++ {
			if n := len(got[fmt.Sprintf("idle%d", round)]); n != 1 {
				t.Fatalf("idle%d holds %d messages", round, n)
			}
		}
		for _, m := range receiveN(t, c, 4*rounds+1) {
			if m.Priority != MaxPriority || !strings.HasPrefix(string(m.Body), "m-lo-") {
				t.Fatalf("left behind: priority %d, %q", m.Priority, m.Body[:10])
			}
		}
	})
}

// Messages of a short retention expire unread (the timing wheel, no
// receive), between messages of a queue that keeps one in sixty; the
// attributes change half way (retention, delay, visibility, a dead-letter
// policy), which changes no message already sent.
func TestCompactionClaimShortRetentionAndAttributeChanges(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, _ := claimBroker(t, nil)
		short := claimQueue(t, b, "short", func(c *QueueConfig) { c.Retention = MinRetention })
		keep := claimQueue(t, b, "keep", nil)
		claimQueue(t, b, "dlq", nil)
		rounds := 30
		for round := 0; round < rounds; round++ {
			if round == rounds/2 {
				ret, delay, vis, dlq, mrc := 2*MinRetention, 5*time.Second, time.Minute, "dlq", 2
				if err := b.SetQueueAttributes("short", ConfigPatch{Retention: &ret, Delay: &delay, VisibilityTimeout: &vis, DeadLetterQueue: &dlq, MaxReceiveCount: &mrc}); err != nil {
					t.Fatal(err)
				}
				if err := b.SetQueueAttributes("keep", ConfigPatch{Delay: &delay}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := keep.Send([]SendEntry{{Body: claimBody("keep", round, 1000)}}, nil); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 60; i++ {
				if _, err := short.Send([]SendEntry{{Body: claimBody("short", round*60+i, 1000)}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if round%4 == 0 {
				_ = receiveN(t, short, 8) // some in flight when they expire
			}
			clk.Advance(10 * time.Second)
		}
		clk.Advance(2*MinRetention + time.Second)
		got := checkClaim(t, b, "retention")
		if len(got["short"]) != 0 || len(got["dlq"]) != 0 || len(got["keep"]) != rounds {
			t.Fatalf("short %d, dlq %d, keep %d: want 0, 0, %d", len(got["short"]), len(got["dlq"]), len(got["keep"]), rounds)
		}
		if st := b.Stats().Storage.Compaction; st.Relocated == 0 {
			t.Fatalf("nothing relocated: %+v", st)
		}
	})
}

// Long polls wait on a queue whose only messages are delayed and pinned
// in old segments; compaction moves them while the polls wait, and the
// polls get them, intact, when the delay ends.
func TestCompactionClaimLongPollsAcrossRelocation(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, _ := claimBroker(t, nil)
		lp := claimQueue(t, b, "lp", nil)
		c := claimQueue(t, b, "c", nil)
		want := map[string]bool{}
		for seg := 0; seg < 8; seg++ {
			body := claimBody("lp", seg, 1000)
			want[string(body)] = true
			if _, err := lp.Send([]SendEntry{{Body: body, Delay: 20 * time.Second, HasDelay: true}}, nil); err != nil {
				t.Fatal(err)
			}
			sendN(t, c, 60, 1000, 0)
			drain(t, c, 60)
		}
		type res struct {
			msgs []Message
			err  error
		}
		out := make(chan res, 8)
		for i := 0; i < 8; i++ {
			go func() {
				m, err := lp.Receive(context.Background(), ReceiveOptions{Max: 1, Wait: 30 * time.Second, HasWait: true}, nil)
				out <- res{m, err}
			}()
		}
		deadline := time.Now().Add(30 * time.Second)
		for waiting(lp) < 8 {
			if time.Now().After(deadline) {
				t.Fatal("the long polls never waited")
			}
			time.Sleep(time.Millisecond)
		}
		checkClaim(t, b, "long polls waiting")
		if st := b.Stats().Storage.Compaction; st.Relocated < 7 {
			t.Fatalf("relocated %d delayed bodies, want one per sealed segment", st.Relocated)
		}
		clk.Advance(21 * time.Second)
		for i := 0; i < 8; i++ {
			select {
			case r := <-out:
				if r.err != nil || len(r.msgs) != 1 {
					t.Fatalf("long poll: %d messages, %v", len(r.msgs), r.err)
				}
				if !want[string(r.msgs[0].Body)] || md5.Sum(r.msgs[0].Body) != r.msgs[0].MD5 {
					t.Fatalf("long poll got %q", r.msgs[0].Body[:12])
				}
				delete(want, string(r.msgs[0].Body))
			case <-time.After(30 * time.Second):
				t.Fatalf("%d long polls never returned", 8-i)
			}
		}
	})
}

// waiting returns the receives waiting on q.
func waiting(q *Queue) int {
	q.waiters.mu.Lock()
	defer q.waiters.mu.Unlock()
	return q.waiters.n
}

// A segment cut short: each small message that stays is followed by a
// large one that does not fit in what is left of the segment, so the log
// starts a new segment for it (wal invariant 1; the memory log likewise)
// and the small one's segment holds little more than it. The large ones
// are consumed. Each such segment is "at least half live" by its used
// bytes, so it is never relocated, while it holds a whole segment (file
// or buffer).
func TestCompactionClaimSegmentsCutShort(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, _ := claimBroker(t, nil)
		q := claimQueue(t, b, "c", nil)
		rnd := rand.New(rand.NewPCG(5, 5))
		big := make([]byte, 62000) // incompressible: the log compresses large records
		for round := 0; round < 20; round++ {
			if _, err := q.Send([]SendEntry{{Body: claimBody("small", round, 4000), Delay: MaxDelay, HasDelay: true}}, nil); err != nil {
				t.Fatal(err)
			}
			for i := range big {
				big[i] = 'a' + byte(rnd.IntN(26))
			}
			if _, err := q.Send([]SendEntry{{Body: big}}, nil); err != nil {
				t.Fatal(err)
			}
			drain(t, q, 1)
		}
		got := checkClaim(t, b, "cut short")
		if len(got["c"]) != 20 {
			t.Fatal(len(got["c"]))
		}
	})
}

// A kill -9 between compaction's steps: part way through a segment's
// rewrite (the budget stops a pass inside it), between a relocation and
// the checkpoint that lets the old segment go, and after the removal.
// Each restart finds every message exactly once, with its body.
func TestCompactionClaimKillDuringRewrite(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	opts := claimOptions(func(o *Options) { o.Stripes = 1 })
	b := openDurableTest(t, dir, clk, opts)
	q := claimQueue(t, b, "c", nil)
	rnd := rand.New(rand.NewPCG(11, 11))
	deleteSome(t, q, 12, func(int) bool { return rnd.IntN(3) != 0 }) // a third kept, Inactive
	sendN(t, q, 20, 1000, time.Hour)                                 // and some Delayed
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	want := claimAudit(t, b)["c"]
	t.Logf("%d messages kept", len(want))
	same := func(step string, got map[string][16]byte) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, want %d", step, len(got), len(want))
		}
		for id, sum := range want {
			if g, ok := got[id]; !ok || g != sum {
				t.Fatalf("%s: message %s lost or changed (found %v)", step, id, ok)
			}
		}
	}
	for step := 0; step < 8; step++ {
		budget := int64(3000 * (step + 1))
		if _, _, err := b.compactOnce(budget); err != nil {
			t.Fatal(err)
		}
		if step%3 == 1 {
			// Checkpoint, and a pass that removes what the relocations emptied.
			if err := durableOf(b).checkpoint(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.compactOnce(budget); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("step %d: %+v", step, b.Stats().Storage.Compaction)
		crashBroker(b)
		b = openDurableTest(t, dir, clk, opts)
		same(fmt.Sprintf("restart %d", step), claimAudit(t, b)["c"])
	}
	t.Cleanup(func() { b.Close() })
	same("compacted", checkClaim(t, b, "after the restarts")["c"])
}

// HTTP pushes failing and retried (each retry a visibility change of the
// notification in its push queue) while a queue churns for many segments:
// compaction moves the waiting notifications, and once the endpoint
// answers, each is pushed with its body.
func TestCompactionClaimPushRetriesPending(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, _ := claimBroker(t, func(o *Options) { o.Push = pushOptions() })
		done := attempts(b)
		rcv := newReceiver(t, clk)
		rcv.setStatus(500)
		c := claimQueue(t, b, "c", nil)
		if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Subscribe("t", "http", SubscriptionConfig{Endpoint: rcv.url("/"), Strategy: ExponentialDecayRetry}); err != nil {
			t.Fatal(err)
		}
		const n = 6
		attemptAll := func() {
			t.Helper()
			for i := 0; i < n; i++ {
				rcv.next(t)
				waitAttempt(t, done)
			}
		}
		for i := 0; i < n; i++ {
			if _, err := b.Publish("t", PublishInput{Body: claimBody("push", i, 1000)}); err != nil {
				t.Fatal(err)
			}
		}
		attemptAll()
		for round := 0; round < 40; round++ {
			sendN(t, c, 60, 1000, 0)
			drain(t, c, 60)
			if round%8 == 7 {
				clk.Advance(10 * time.Minute) // every notification due again: one more failed attempt each
				attemptAll()
				compactAll(t, b)
			}
		}
		got := checkClaim(t, b, "pushes pending")
		if q := got[pushQueueName(subID(t, b, "t", "http"))]; len(q) != n {
			t.Fatalf("the push queue holds %d notifications, want %d", len(q), n)
		}
		if st := b.Stats().Storage.Compaction; st.Relocated < n {
			t.Fatalf("relocated %d bodies: the notifications were not moved (%+v)", st.Relocated, st)
		}
		rcv.setStatus(204)
		clk.Advance(10 * time.Minute)
		seen := map[int]bool{}
		for len(seen) < n {
			req := rcv.next(t)
			for i := 0; i < n; i++ {
				if strings.Contains(string(req.body), fmt.Sprintf("m-push-%d-", i)) {
					seen[i] = true
				}
			}
		}
		id := subID(t, b, "t", "http")
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, left := pushedMessage(t, b, id); !left {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("pushed notifications never left their push queue")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// A backlog drained in order, but slower than compaction's drain rate (a
// segment's last half in more than compactSettleMax: with 64 MiB
// segments, below about 0.55 MB/s). By design (docs/architecture.md,
// "Compaction") the rest of each segment it passes is rewritten once it is
// half empty, and the bodies rewritten are drained from the log's head:
// less than the backlog in all, not nothing (docs/operations.md said a
// steady rise while queues drain in order would be a bug, whatever the
// rate; before the memory log's segments had ends of their own it was
// more than the backlog).
func TestCompactionClaimSlowInOrderDrain(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, q := compactionBrokerStripes(t, 1)
		const n = 300
		sendN(t, q, n, 1000, 0) // about 5 segments
		for left := n; left > 0; left-- {
			drain(t, q, 1)
			tick(clk, 4*time.Second) // 250 bytes a second: 64 KiB segments' half in about 130 s
		}
		tick(clk, 2*time.Second)
		st := b.Stats().Storage.Compaction
		t.Logf("drained: %+v", st)
		if st.Relocated >= n {
			t.Fatalf("compaction rewrote %d bodies of an in-order drain of %d: some more than once", st.Relocated, n)
		}
		if held, live, seg := storeUsage(b); live != 0 || held > 2*seg {
			t.Fatalf("drained: held %d, live %d", held, live)
		}
	})
}

// A backlog nobody reads fills whole segments (all live); another queue
// churns after it. The backlog's full segments need no rewrite, however
// many segments after them churn and go.
func TestCompactionClaimFullSegmentsStay(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, _ := claimBroker(t, func(o *Options) { o.Stripes = 1 })
		idle := claimQueue(t, b, "idle", nil)
		c := claimQueue(t, b, "c", nil)
		sendN(t, idle, 200, 1000, 0) // about 3 segments, all live
		full := map[uint64]int64{}
		for _, s := range b.store.segments(nil) {
			if !s.active && s.live*10 > int64(s.end-s.start)*9 {
				full[s.start] = s.live
			}
		}
		if len(full) < 2 {
			t.Fatalf("only %d full segments", len(full))
		}
		for round := 0; round < 60; round++ {
			sendN(t, c, 60, 1000, 0)
			drain(t, c, 60)
			if round%10 == 9 {
				compactAll(t, b)
			}
		}
		checkClaim(t, b, "full segments")
		for _, s := range b.store.segments(nil) {
			if live, ok := full[s.start]; ok && s.live == live {
				delete(full, s.start)
			}
		}
		if len(full) != 0 {
			t.Fatalf("%d segments all live were rewritten: %+v", len(full), b.Stats().Storage.Compaction)
		}
	})
}

// The same at the smallest segment the daemon takes (--wal-segment-bytes
// 131072) with messages as large as a send takes (a 64 KiB body and 32 KiB
// of properties): a kept message of 34.5 KB leaves no room for the next one,
// and its segment holds 128 KiB for it.
func TestCompactionClaimSegmentsCutShortDaemonMinimum(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, _ := claimBroker(t, func(o *Options) {
			o.WAL.SegmentBytes = 128 << 10
			o.MemSegmentBytes = 128 << 10
		})
		q := claimQueue(t, b, "c", nil)
		rnd := rand.New(rand.NewPCG(6, 6))
		noise := func(n int) []byte {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rnd.Uint32())
			}
			return p
		}
		for round := 0; round < 12; round++ {
			if _, err := q.Send([]SendEntry{{Body: noise(34500), Delay: MaxDelay, HasDelay: true}}, nil); err != nil {
				t.Fatal(err)
			}
			var props []Property
			for i := 0; i < 7; i++ {
				props = append(props, Property{Name: []byte(fmt.Sprintf("p%d", i)), Value: noise(4500), Type: PropBinary})
			}
			if _, err := q.Send([]SendEntry{{Body: noise(MaxMessageBytes), Properties: props}}, nil); err != nil {
				t.Fatal(err)
			}
			drain(t, q, 1)
		}
		got := checkClaim(t, b, "cut short, 128 KiB")
		if len(got["c"]) != 12 {
			t.Fatal(len(got["c"]))
		}
	})
}

// The same with the log on a disk that loses what was not fsynced, and a
// random part of it kept, the last write possibly torn (wal.MemFS
// CrashClone): a relocate record half written, relocations lost while
// their old segment stays. Every restart finds every message exactly once.
func TestCompactionClaimPowerLossDuringRewrite(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir, fs, clk := t.TempDir(), wal.NewMemFS(), NewFakeClock(t0)
			b := powerLossOpen(t, dir, fs, clk, wal.SyncNone)
			q := claimQueue(t, b, "c", nil)
			claimQueue(t, b, "dlq", func(c *QueueConfig) { c.VisibilityTimeout = 12 * time.Hour })
			src := claimQueue(t, b, "src", func(c *QueueConfig) { c.DeadLetterQueue = "dlq"; c.MaxReceiveCount = 1 })
			rnd := rand.New(rand.NewPCG(seed, 17))
			for round := 0; round < 12; round++ {
				deleteSome(t, q, 1, func(int) bool { return rnd.IntN(3) != 0 })
				// Dead letters (their bodies in the move records, with properties).
				if _, err := src.Send([]SendEntry{{Body: claimBody("dl", round, 1000)}}, nil); err != nil {
					t.Fatal(err)
				}
				receiveN(t, src, 1)
				clk.Advance(11 * time.Second)
				receiveN(t, src, 1)
			}
			sendN(t, q, 20, 1000, time.Hour)
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := durableOf(b).checkpoint(); err != nil {
				t.Fatal(err)
			}
			want := claimAudit(t, b)
			if len(want["dlq"]) != 12 {
				t.Fatalf("%d dead letters, want 12", len(want["dlq"]))
			}
			var moved, removed int64
			for step := 0; step < 6; step++ {
				budget := int64(4000 * (step + 1))
				if _, _, err := b.compactOnce(budget); err != nil {
					t.Fatal(err)
				}
				if step%2 == 1 {
					if err := durableOf(b).checkpoint(); err != nil {
						t.Fatal(err)
					}
					if _, _, err := b.compactOnce(budget); err != nil {
						t.Fatal(err)
					}
				}
				if _, _, err := b.compactOnce(budget); err != nil { // unsynced relocations at the cut
					t.Fatal(err)
				}
				st := b.Stats().Storage.Compaction
				moved, removed = moved+st.Relocated, removed+st.SegmentsRemoved
				lost := fs.CrashClone(rnd)
				crashBroker(b)
				fs = lost
				b = powerLossOpen(t, dir, fs, clk, wal.SyncNone)
				got := claimAudit(t, b)
				for qn, msgs := range want {
					if len(got[qn]) != len(msgs) {
						t.Fatalf("restart %d: %s holds %d messages, want %d (recovery %+v)", step, qn, len(got[qn]), len(msgs), b.Recovery())
					}
					for id, sum := range msgs {
						if g, ok := got[qn][id]; !ok || g != sum {
							t.Fatalf("restart %d: %s message %s lost or changed (found %v)", step, qn, id, ok)
						}
					}
				}
			}
			t.Logf("relocated %d bodies, removed %d segments", moved, removed)
			if moved == 0 || removed == 0 {
				t.Fatalf("relocated %d, removed %d: the test compacts nothing", moved, removed)
			}
			b.Close()
		})
	}
}
