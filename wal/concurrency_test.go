package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// selfPayload returns a payload that carries its own seed, so any reader
// can check it without shared state.
func selfPayload(seed uint64, n int) []byte {
	return testPayload(seed, max(n, 8), seed%3 == 0)
}

func checkSelfPayload(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	seed := binary.LittleEndian.Uint64(b)
	return bytes.Equal(b, selfPayload(seed, len(b)))
}

// TestConcurrentAppendRead runs appenders (Append + WaitDurable), random
// ReadAt readers (ring hits and file reads) and a Reader replaying the log,
// all at once, under -race.
func TestConcurrentAppendRead(t *testing.T) {
	for _, tc := range []struct {
		fs   string
		mode SyncMode
	}{{"os", SyncAlways}, {"mem", SyncNone}, {"mem", SyncInterval}} {
		t.Run(tc.fs+"/"+tc.mode.String(), func(t *testing.T) {
			var fs FS = NewMemFS()
			dir := crashDir
			if tc.fs == "os" {
				fs, dir = OSFS(), t.TempDir()
			}
			opts := testOptions(t, fs)
			opts.Sync = tc.mode
			opts.CompressMinBytes = 1024
			l := mustOpen(t, dir, opts)
			defer l.Close()
			concurrentRun(t, l)
		})
	}
}

func concurrentRun(t *testing.T, l *Log) {
	const writers = 8
	perWriter, maxReplays := 200, int64(20)
	if testing.Short() {
		perWriter, maxReplays = 100, 8
	}
	readQ := make(chan Record, 64)
	var (
		mu      sync.Mutex
		recs    []Record
		stop    atomic.Bool
		wg, rwg sync.WaitGroup
	)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < perWriter; {
				batch := make([]Record, 1+rnd.IntN(3))
				for j := range batch {
					seed := uint64(g)<<32 | uint64(i+j)
					batch[j] = Record{Type: RecordType(1 + seed%250), Body: selfPayload(seed, rnd.IntN(2000))}
				}
				if err := l.Append(batch); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				if err := l.WaitDurable(batch[len(batch)-1].Pos); err != nil {
					t.Errorf("WaitDurable: %v", err)
					return
				}
				mu.Lock()
				recs = append(recs, batch...)
				mu.Unlock()
				select {
				case readQ <- batch[0]:
				default:
				}
				i += len(batch)
			}
		}()
	}
	var reads, replays atomic.Int64
	for g := range 3 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 2))
			var buf []byte
			// Read each just-acknowledged record (mostly a ring hit) and a
			// random older one (mostly a file read).
			for fresh := range readQ {
				mu.Lock()
				old := recs[rnd.IntN(len(recs))]
				mu.Unlock()
				for _, r := range []Record{fresh, old} {
					hint := []int{0, r.Size, r.Size + 100, 16}[rnd.IntN(4)]
					typ, got, err := l.ReadAt(r.Pos, hint, buf)
					if err != nil || typ != r.Type || !bytes.Equal(got, r.Body) {
						t.Errorf("ReadAt(%d, hint %d): typ %d, err %v", r.Pos, hint, typ, err)
						return
					}
					buf = got[:0]
					reads.Add(1)
				}
			}
		}()
	}
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for !stop.Load() && replays.Load() < maxReplays {
			if err := replayOnce(l); err != nil {
				t.Error(err)
				return
			}
			replays.Add(1)
		}
	}()
	wg.Wait()
	close(readQ)
	stop.Store(true)
	rwg.Wait()
	if err := replayOnce(l); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	t.Logf("%d reads, %d replays; stats: records %d writes %d fsyncs %d ring reads %d file reads %d",
		reads.Load(), replays.Load(), st.Records, st.Writes, st.Fsyncs, st.RingReads, st.FileReads)
	if st.Records != uint64(len(recs)) {
		t.Fatalf("stats count %d records, appended %d", st.Records, len(recs))
	}
}

// replayOnce reads the whole written log and checks every payload.
func replayOnce(l *Log) error {
	r, err := l.NewReader(firstStart(l), l.WrittenEnd())
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		p, typ, payload, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if !checkSelfPayload(payload) || typ != RecordType(1+binary.LittleEndian.Uint64(payload)%250) {
			return fmt.Errorf("replay: bad record at %d", p)
		}
	}
}
