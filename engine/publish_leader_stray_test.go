package engine

// Review W of the large append (wal invariant 12, 2026-12-07): a
// replicated leader's large publish meets a roll stall half way: a prefix
// of the group is in the leader's log, in no proposal. It must not reach
// the leader's live state, its checkpoint, the follower, or the leader's
// state after a restart.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

func TestLeaderStrayPublishGroupPrefix(t *testing.T) {
	const subs = 40
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1}
	ffs := wal.NewFaultFS(wal.OSFS())
	ffs.Filter = func(name string) bool { return strings.HasSuffix(name, ".spare") }
	leader := true
	h.mod = func(o *Options) {
		o.WAL.BufferBytes, o.WAL.SegmentBytes = 256<<10, 1<<20
		if leader {
			o.WAL.FS = ffs
		}
	}
	ldir := t.TempDir()
	h.leader = h.open(ldir, h.rep)
	leader = false
	h.fdir = t.TempDir()
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	defer func() { h.leader.Close(); h.follower.Close() }()
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	h.topicToQueues("t", subs)
	h.do(func() error { _, err := h.leader.CreateQueue("other", DefaultQueueConfig()); return err })
	ffs.FailPreallocate(syscall.ENOSPC)
	_, err := h.leader.Publish("t", PublishInput{Body: randLetters(MaxMessageBytes)})
	if !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("publish across a stalled roll: %v", err)
	}
	ffs.Disarm()
	deadline := time.Now().Add(30 * time.Second)
	for h.leader.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still unhealthy: %v", h.leader.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	oq, _ := h.leader.Queue("other")
	h.do(func() error { _, err := oq.Send([]SendEntry{{Body: []byte("after")}}, nil); return err })
	check := func(b *Broker, what string) {
		t.Helper()
		for i := range subs {
			q, err := b.Queue(fmt.Sprintf("q%d", i))
			if err != nil {
				t.Fatal(err)
			}
			info, _ := q.Attributes()
			if n := info.Active + info.Inactive + info.Delayed; n != 0 {
				t.Fatalf("%s: q%d holds %d messages of a failed publish", what, i, n)
			}
		}
		q, _ := b.Queue("other")
		if info, _ := q.Attributes(); info.Active != 1 {
			t.Fatalf("%s: other holds %d", what, info.Active)
		}
	}
	check(h.leader, "leader, live")
	check(h.follower, "follower, live")
	if err := h.leader.store.(*replStore).checkpoint(); err != nil {
		t.Fatal(err)
	}
	h.restartFollower()
	check(h.follower, "follower, restarted")
	if err := h.leader.PersistHardState(ReplicaHardState{Term: 1, Vote: 1, Commit: h.next - 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.leader.CloseForRebuild(); err != nil {
		t.Fatal(err)
	}
	h.leader = h.open(ldir, h.rep)
	check(h.leader, "leader, restarted after a checkpoint")
	t.Logf("leader recovery: %+v", h.leader.Recovery())
}

// topicToQueues creates topic on h's leader and queues q0..q(n-1), each
// subscribed to it (SIMPLIFIED).
func (h *handShard) topicToQueues(topic string, n int) {
	h.do(func() error { _, err := h.leader.CreateTopic(topic, DefaultTopicConfig()); return err })
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		h.do(func() error { _, err := h.leader.CreateQueue(q, DefaultQueueConfig()); return err })
		h.do(func() error {
			_, err := h.leader.Subscribe(topic, "to-"+q, SubscriptionConfig{Endpoint: "acs:mns:test:1:queues/" + q, Format: FormatSimplified})
			return err
		})
	}
}
