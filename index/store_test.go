package index

import (
	"errors"
	"sync"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero value", Options{}, true},
		{"defaults", DefaultOptions(), true},
		{"tiny memtable", Options{MemTableBytes: 1000}, false},
		{"huge memtable", Options{MemTableBytes: 2 << 30}, false},
		{"one memtable", Options{NumMemtables: 1}, false},
		{"one compactor", Options{NumCompactors: 1}, false},
		{"negative cache", Options{BlockCacheBytes: -1}, false},
		{"some cache", Options{BlockCacheBytes: 1 << 20}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate error %v does not wrap ErrInvalidOptions", err)
			}
			if !tt.ok {
				if _, err := Open(t.TempDir(), tt.o); !errors.Is(err, ErrInvalidOptions) {
					t.Fatalf("Open = %v, want ErrInvalidOptions", err)
				}
			}
		})
	}
	d := DefaultOptions()
	if d.Logger == nil || d.MemTableBytes != DefaultMemTableBytes || d.NumMemtables != DefaultNumMemtables {
		t.Fatalf("DefaultOptions = %+v", d)
	}
	if DefaultOptions().maxValueBytes() < 60 || Options(d).maxValueBytes() >= maxInlineValueBytes {
		t.Fatalf("maxValueBytes = %d", d.maxValueBytes())
	}
}

// TestClosed checks that a second Close and every call after Close return
// ErrClosed.
func TestClosed(t *testing.T) {
	s, err := Open(t.TempDir(), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.PutMessage(1, 1, nil)
	checks := map[string]error{
		"Close":  s.Close(),
		"Commit": s.Commit(b),
		"Queues": s.Queues(func(uint64, []byte) error { return nil }),
		"Messages": s.Messages(func(uint64, uint64, []byte) error {
			return nil
		}),
		"Compact": s.Compact(),
	}
	_, _, checks["Position"] = s.Position()
	_, checks["Meta"] = s.Meta("x")
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if n := s.DiskBytes(); n != 0 {
		t.Errorf("DiskBytes after Close = %d", n)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, testOptions(t))
	if _, err := Open(dir, testOptions(t)); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openT(t, dir, testOptions(t)) // free again
}

// TestScanCallbackError checks that an error from the callback stops the
// scan and comes back unchanged.
func TestScanCallbackError(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	want := newState()
	commitMessages(t, s, &want, 1, 0, 100, 1, 1)
	b := s.NewBatch()
	b.PutQueue(1, nil)
	b.PutQueue(2, nil)
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err := s.Messages(func(q, seq uint64, v []byte) error {
		n++
		if n == 10 {
			return stop
		}
		return nil
	})
	if err != stop || n != 10 {
		t.Fatalf("Messages = %v after %d calls, want stop after 10", err, n)
	}
	if err := s.Queues(func(uint64, []byte) error { return stop }); err != stop {
		t.Fatalf("Queues = %v, want stop", err)
	}
}

// TestScanCallbackPanic checks that a panic in the callback is not turned
// into an error.
func TestScanCallbackPanic(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	want := newState()
	commitMessages(t, s, &want, 1, 0, 10, 1, 1)
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the callback's panic", r)
		}
	}()
	_ = s.Messages(func(uint64, uint64, []byte) error { panic("boom") })
	t.Fatal("Messages returned after the callback panicked")
}

// TestConcurrentUse runs commits, scans and point reads at once (for -race)
// and closes while they may still be running.
func TestConcurrentUse(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	var wg sync.WaitGroup
	for w := uint64(0); w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := s.NewBatch()
			for i := uint64(0); i < 20; i++ {
				b.Reset()
				for seq := i * 500; seq < i*500+500; seq++ {
					b.PutMessage(w, seq, msgVal(w, seq, 1))
				}
				if i%5 == 4 {
					b.DeleteQueue(w)
				}
				b.SetPosition(i)
				if err := s.Commit(b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			last := [2]uint64{}
			first := true
			err := s.Messages(func(q, seq uint64, v []byte) error {
				k := [2]uint64{q, seq}
				if !first && (k[0] < last[0] || k[0] == last[0] && k[1] <= last[1]) {
					t.Errorf("scan out of order: %v after %v", k, last)
				}
				first, last = false, k
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if _, _, err := s.Position(); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDiskShrinks checks that deleted keys leave the disk once compacted:
// after deleting 90% of the messages and compacting, DiskBytes is well below
// what it was.
func TestDiskShrinks(t *testing.T) {
	n := uint64(1_000_000)
	if testing.Short() {
		n = 100_000
	}
	dir := t.TempDir()
	opts := testOptions(t)
	s := openT(t, dir, opts)
	want := newState()
	for from := uint64(0); from < n; from += 50_000 {
		commitMessages(t, s, &want, from%7, from, from+50_000, 1, from+1)
	}
	// Reopen: Close flushes the memtable and merges level 0 into the tree.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	full := s.DiskBytes()

	b := s.NewBatch()
	for k := range want.messages {
		if k[1]%10 != 0 {
			b.DeleteMessage(k[0], k[1])
			delete(want.messages, k)
		}
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	after := s.DiskBytes()
	t.Logf("%d messages: %d bytes; after deleting 90%% and compacting: %d bytes", n, full, after)
	if after > full/4 {
		t.Fatalf("disk use %d after deleting 90%% of %d bytes", after, full)
	}
	if d := diffState(readState(t, s), want); d != "" {
		t.Fatal(d)
	}
}
