package engine

// Review W of the large append (wal invariant 12, 2026-12-07): a publish
// group larger than the log's ring is contiguous on the leader (one
// wal.Append), but a follower persists a received entry one record per
// wal.Append (PersistEntries, replica_log.go), under r.mu only; a
// compaction relocation is appended without r.mu (replStore.append), so it
// can land between the group's header and its members. The fold aborts a
// group at any non-member record (fold.go apply), relocations included.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// hookFS runs hook (once armed) in the writer goroutine, at a write to a
// segment file.
type hookFS struct {
	wal.FS
	hook atomic.Pointer[func()]
}

type hookFile struct {
	wal.File
	fs *hookFS
}

func (h *hookFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".wal") {
		return f, err
	}
	return &hookFile{File: f, fs: h}, nil
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	if fn := f.fs.hook.Swap(nil); fn != nil {
		(*fn)()
	}
	return f.File.WriteAt(p, off)
}

// TestFollowerPublishGroupWithARelocationInside: a follower persists a
// large publish (20 deliveries of 60 KB through a 256 KiB ring) while its
// compaction relocates an older body; after a restart every subscription's
// queue must still hold its delivery on the follower.
func TestFollowerPublishGroupWithARelocationInside(t *testing.T) {
	const subs = 20
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1}
	fs := &hookFS{FS: wal.OSFS()}
	follower := false
	h.mod = func(o *Options) {
		o.WAL.BufferBytes = 256 << 10
		if follower {
			o.WAL.FS = fs
		}
	}
	h.leader = h.open(t.TempDir(), h.rep)
	h.fdir = t.TempDir()
	follower = true
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	defer func() { h.leader.Close(); h.follower.Close() }()
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := h.leader.CreateQueue("keep", DefaultQueueConfig()); return err })
	kq, _ := h.leader.Queue("keep")
	h.do(func() error { _, err := kq.Send([]SendEntry{{Body: []byte("kept body")}}, nil); return err })
	h.topicToQueues("t", subs)
	// Fill the follower's segment past the kept body, so that it is no
	// longer the active one.
	for range 3 {
		h.do(func() error { _, err := kq.Send([]SendEntry{{Body: randLetters(30000)}}, nil); return err })
	}
	if err := h.follower.SyncLog(); err != nil {
		t.Fatal(err)
	}
	fk, _ := h.follower.Queue("keep")
	var keepSeg uint64
	st := &fk.stripes[0]
	st.mu.Lock()
	for i := uint32(0); i < st.slab.n; i++ {
		if st.slab.valid(i) && st.slab.at(i).seq == 1 {
			keepSeg = st.slab.at(i).bodyPos
		}
	}
	st.mu.Unlock()
	for _, s := range h.follower.store.segments(nil) {
		if keepSeg >= s.start && keepSeg < s.end {
			keepSeg = s.start
			break
		}
	}

	// While the follower's writer writes the group's first bytes, its
	// compaction relocates the kept body.
	moved := make(chan int, 1)
	hook := func() {
		go func() {
			n, _, _, err := h.follower.relocateSegment(keepSeg, 0, 0)
			if err != nil {
				t.Error(err)
			}
			moved <- n
		}()
		// Until the first relocation is appended (the rest may need the
		// ring room this writer makes).
		deadline := time.Now().Add(10 * time.Second)
		for h.follower.compacted.relocated.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	fs.hook.Store(&hook)
	body := randLetters(60000)
	h.do(func() error { _, err := h.leader.Publish("t", PublishInput{Body: body}); return err })
	if n := <-moved; n == 0 {
		t.Fatal("nothing relocated")
	}

	// Where the relocation landed in the follower's log.
	order := []string{}
	_, err := h.follower.store.(*replStore).scanAll(func(pos uint64, typ uint8) {
		switch {
		case typ == recPublish:
			order = append(order, "H")
		case isSendRec(typ):
			order = append(order, "m")
		case isRelocateRec(typ):
			order = append(order, "R")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("follower log (H publish, m send, R relocate): %s", strings.Join(order, ""))

	h.restartFollower()
	missing := 0
	for i := range subs {
		q, err := h.follower.Queue(fmt.Sprintf("q%d", i))
		if err != nil {
			t.Fatal(err)
		}
		info, err := q.Attributes()
		if err != nil {
			t.Fatal(err)
		}
		if n := info.Active + info.Inactive + info.Delayed; n != 1 {
			missing++
		}
	}
	if missing > 0 || h.follower.Recovery().AbortedPublishes != 0 {
		t.Fatalf("after a restart the follower lacks the delivery in %d of %d queues (recovery aborted %d publishes): a relocation between a received group's records cut it short",
			missing, subs, h.follower.Recovery().AbortedPublishes)
	}
}

// randLetters returns n random lowercase letters: s2 does not shrink them.
func randLetters(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 5))
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return b
}

// scanAll reads the whole log (test helper).
func (r *replStore) scanAll(fn func(pos uint64, typ uint8)) (int, error) {
	n := 0
	err := r.readRange(0, uint64(r.wal.WrittenEnd()), func(pos uint64, size uint32, typ uint8, payload []byte) {
		n++
		fn(pos, typ)
	})
	return n, err
}
