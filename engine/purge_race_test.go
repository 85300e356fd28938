package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPurgeRacingReceivesAndDeletes: a purge that runs while messages are
// sent, received and deleted takes every message sent before it started
// (received ones too: their handles stop working), keeps every message
// sent after it answered, and leaves the stripes consistent
// (docs/operations.md, "Purging a queue": "What it takes"). The purge
// tests before ran no receive or send beside a purge.
func TestPurgeRacingReceivesAndDeletes(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 2})
	cfg := DefaultQueueConfig()
	q := mustQueue(t, b, "race", cfg)
	const pre = 3*purgeChunk + 500
	for sent := 0; sent < pre; sent += MaxBatch {
		batch := make([]SendEntry, 0, MaxBatch)
		for i := sent; i < min(sent+MaxBatch, pre); i++ {
			batch = append(batch, SendEntry{Body: fmt.Appendf(nil, "pre-%d", i)})
		}
		if _, err := q.Send(batch, nil); err != nil {
			t.Fatal(err)
		}
	}

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		held    = map[string]ReceiptHandle{} // received, not deleted: Inactive
		deleted = map[string]bool{}
		failed  error
	)
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		mu.Unlock()
	}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs := make([]error, 16)
			for n := 0; !stop.Load(); n++ {
				ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
				if errors.Is(err, ErrMessageNotExist) {
					continue
				}
				if err != nil {
					fail(err)
					return
				}
				var del []ReceiptHandle
				var names []string
				mu.Lock()
				for k, m := range ms {
					if (k+r+n)%2 == 0 {
						del, names = append(del, m.Handle), append(names, string(m.Body))
					} else {
						held[string(m.Body)] = m.Handle
					}
				}
				mu.Unlock()
				if len(del) == 0 {
					continue
				}
				if _, err := q.Delete(del, errs[:len(del)]); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				for k, e := range errs[:len(del)] {
					switch {
					case e == nil:
						deleted[names[k]] = true
					case errors.Is(e, ErrMessageNotExist):
						// purged between the receive and the delete
					default:
						fail(e)
					}
				}
				mu.Unlock()
			}
		}()
	}
	var during atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if _, err := q.Send([]SendEntry{{Body: fmt.Appendf(nil, "during-%d", i)}}, nil); err != nil {
				fail(err)
				return
			}
			during.Add(1)
		}
	}()
	// Let the others run a little before the purge (a condition, not a time).
	for during.Load() < 50 && !stop.Load() {
		mu.Lock()
		bad := failed != nil
		mu.Unlock()
		if bad {
			break
		}
		runtime.Gosched()
	}
	n, err := q.Purge()
	if err != nil {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	const post = 40
	for i := range post {
		if _, err := q.Send([]SendEntry{{Body: fmt.Appendf(nil, "post-%d", i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	checkInvariants(t, q)

	// What is left: the Active ones (received now) and the ones the
	// receivers hold (Inactive; the fake clock never ends their timeout).
	left := map[string]bool{}
	for {
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			left[string(m.Body)] = true
		}
	}
	errs := make([]error, 1)
	for body, h := range held {
		if _, err := q.Delete([]ReceiptHandle{h}, errs); err != nil {
			t.Fatal(err)
		}
		switch {
		case errs[0] == nil:
			left[body] = true
		case !errors.Is(errs[0], ErrMessageNotExist):
			t.Fatalf("delete of %s: %v", body, errs[0])
		case !strings.HasPrefix(body, "pre-") && !strings.HasPrefix(body, "during-"):
			t.Errorf("%s was sent after the purge answered, and its handle does not work", body)
		}
	}
	for body := range left {
		if strings.HasPrefix(body, "pre-") {
			t.Errorf("%s, sent before the purge, is still in the queue", body)
		}
	}
	for i := range post {
		if body := fmt.Sprintf("post-%d", i); !left[body] && !deleted[body] {
			t.Errorf("%s, sent after the purge answered, is gone (not deleted by a receiver)", body)
		}
	}
	takenPre := 0
	for body := range deleted {
		if strings.HasPrefix(body, "pre-") {
			takenPre++
		}
	}
	if n < pre-takenPre {
		t.Errorf("Purge answered %d: fewer than the %d messages sent before it and not deleted", n, pre-takenPre)
	}
	t.Logf("purged %d; %d of the messages sent before it deleted by receivers; %d sent during; %d left", n, takenPre, during.Load(), len(left))
}
