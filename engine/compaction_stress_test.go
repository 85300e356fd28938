package engine

// archeng audit: compaction and checkpoints running flat out beside
// concurrent senders, receivers, deleters and visibility changes on a
// durable broker with small segments, then a restart. Every message sent
// must be deleted exactly once or come back after the restart with its
// body intact; every handle must work once. Bounded: a few thousand
// messages, a 2-minute deadline, conditions waited for, never timed.

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

func TestCompactionUnderConcurrentChurn(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { churnUnderCompaction(t, seed) })
	}
}

func churnUnderCompaction(t *testing.T, seed uint64) {
	dir := t.TempDir()
	open := func() *Broker {
		b, err := Open(Options{Dir: dir, Logger: testLogger(t), Stripes: 4,
			WAL: wal.Options{SegmentBytes: 64 << 10, BufferBytes: 1 << 20, Sync: wal.SyncNone}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = MinVisibilityTimeout
	q := mustQueue(t, b, "churn", cfg)

	const producers, perProd, consumers = 2, 5000, 3
	var mu sync.Mutex
	sent := map[MessageID][16]byte{}
	deleted := map[MessageID]int{}
	var nDeleted atomic.Int64
	var prodDone atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	fail := func(format string, a ...any) { t.Errorf(format, a...); cancel() }

	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			defer prodDone.Add(1)
			rnd := rand.New(rand.NewPCG(seed, uint64(p)))
			for i := 0; i < perProd && ctx.Err() == nil; {
				n := min(1+rnd.IntN(MaxBatch), perProd-i)
				es := make([]SendEntry, n)
				for k := range es {
					body := make([]byte, 50+rnd.IntN(3000))
					for j := range body {
						body[j] = byte('a' + rnd.IntN(26))
					}
					copy(body, fmt.Sprintf("p%d-%d-", p, i+k))
					es[k] = SendEntry{Body: body, Priority: 1 + rnd.IntN(16)}
					if rnd.IntN(10) == 0 {
						es[k].Delay, es[k].HasDelay = time.Duration(1+rnd.IntN(300))*time.Millisecond, true
					}
				}
				out, err := q.Send(es, nil)
				if err != nil {
					fail("send: %v", err)
					return
				}
				mu.Lock()
				for k := range out {
					sent[out[k].ID] = md5.Sum(es[k].Body)
				}
				mu.Unlock()
				i += n
			}
		}(p)
	}
	stopConsumers := make(chan struct{})
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, 100+uint64(c)))
			errs := make([]error, 1)
			for ctx.Err() == nil {
				select {
				case <-stopConsumers:
					return
				default:
				}
				msgs, err := q.Receive(ctx, ReceiveOptions{Max: 1 + rnd.IntN(MaxBatch), Wait: 100 * time.Millisecond, HasWait: true}, nil)
				if errors.Is(err, ErrMessageNotExist) || ctx.Err() != nil {
					continue
				}
				if err != nil {
					fail("receive: %v", err)
					return
				}
				for _, m := range msgs {
					mu.Lock()
					want, ok := sent[m.ID]
					mu.Unlock()
					if !ok {
						// The send may not have been recorded yet: wait for it.
						for dl := time.Now().Add(10 * time.Second); !ok && time.Now().Before(dl); {
							time.Sleep(time.Millisecond)
							mu.Lock()
							want, ok = sent[m.ID]
							mu.Unlock()
						}
					}
					if !ok || md5.Sum(m.Body) != want || m.MD5 != want {
						fail("message %s: unknown (%v) or body changed", m.ID, ok)
						return
					}
					switch r := rnd.IntN(10); {
					case r < 8:
						if f, err := q.Delete([]ReceiptHandle{m.Handle}, errs); err != nil || f != 0 {
							// Its visibility (1 s) may have ended first: only then.
							if err == nil && errors.Is(errs[0], ErrMessageNotExist) {
								continue
							}
							fail("delete %s: %v %v", m.ID, err, errs[0])
							return
						}
						mu.Lock()
						deleted[m.ID]++
						mu.Unlock()
						nDeleted.Add(1)
						if f, _ := q.Delete([]ReceiptHandle{m.Handle}, errs); f != 1 || !errors.Is(errs[0], ErrMessageNotExist) {
							fail("handle of %s worked twice: %v", m.ID, errs[0])
							return
						}
					case r == 8:
						nh, _, err := q.ChangeVisibility(m.Handle, MinVisibilityTimeout)
						if errors.Is(err, ErrMessageNotExist) {
							continue
						}
						if err != nil {
							fail("change visibility %s: %v", m.ID, err)
							return
						}
						if f, _ := q.Delete([]ReceiptHandle{m.Handle}, errs); f != 1 || !errors.Is(errs[0], ErrMessageNotExist) {
							fail("old handle of %s worked after a visibility change: %v", m.ID, errs[0])
							return
						}
						_ = nh // left to come back
					default: // abandoned: it comes back after 1 s
					}
				}
			}
		}(c)
	}
	var compactions atomic.Int64
	stopCompactor := make(chan struct{})
	compactorDone := make(chan struct{})
	go func() {
		defer close(compactorDone)
		for {
			select {
			case <-stopCompactor:
				return
			default:
			}
			if err := durableOf(b).checkpoint(); err != nil {
				fail("checkpoint: %v", err)
				return
			}
			if _, _, err := b.compactOnce(0); err != nil {
				fail("compact: %v", err)
				return
			}
			compactions.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// Run until the producers are done and 60 % are deleted.
	for ctx.Err() == nil && (prodDone.Load() < producers || nDeleted.Load() < producers*perProd*85/100) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stopConsumers)
	wg.Wait()
	close(stopCompactor)
	<-compactorDone
	if t.Failed() {
		return
	}
	if ctx.Err() != nil {
		t.Fatalf("deadline: %d deleted of %d", nDeleted.Load(), producers*perProd)
	}
	compactAll(t, b)
	st := b.Stats()
	t.Logf("seed %d: %d sent, %d deleted, %d compaction passes, relocated %d", seed, len(sent), nDeleted.Load(), compactions.Load(), st.Storage.Compaction.Relocated)
	for id, n := range deleted {
		if n != 1 {
			t.Errorf("%s deleted %d times", id, n)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// After the restart: exactly the messages not deleted, bodies intact.
	b = open()
	defer b.Close()
	q, err := b.Queue("churn")
	if err != nil {
		t.Fatal(err)
	}
	left := map[MessageID]bool{}
	errs := make([]error, MaxBatch)
	dl := time.Now().Add(30 * time.Second)
	for len(left)+len(deleted) < len(sent) && time.Now().Before(dl) {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, Wait: time.Second, HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		hs := make([]ReceiptHandle, len(msgs))
		for i, m := range msgs {
			want, ok := sent[m.ID]
			if !ok || md5.Sum(m.Body) != want {
				t.Fatalf("after restart: %s unknown (%v) or body changed", m.ID, ok)
			}
			if deleted[m.ID] > 0 {
				t.Fatalf("after restart: %s came back after its delete", m.ID)
			}
			if left[m.ID] {
				t.Fatalf("after restart: %s received twice within a drain with a fresh visibility", m.ID)
			}
			left[m.ID] = true
			hs[i] = m.Handle
		}
		if f, err := q.Delete(hs, errs); f != 0 || err != nil {
			t.Fatal(f, err, errs[:len(hs)])
		}
	}
	if len(left)+len(deleted) != len(sent) {
		t.Fatalf("after restart: %d left + %d deleted != %d sent", len(left), len(deleted), len(sent))
	}
	info, _ := q.Attributes()
	if info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("not empty after the drain: %+v", info)
	}
}
