package index

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// benchValue fills buf with a 60-byte message value shaped like the
// engine's (state, priority, counters, four timestamps, a WAL location and
// 16 bytes of MD5), so that compression-like effects in the LSM are
// realistic.
func benchValue(buf []byte, q, seq uint64) []byte {
	buf = buf[:0]
	buf = append(buf, 1, byte(seq%16))
	buf = binary.BigEndian.AppendUint16(buf, uint16(seq%3))
	ts := uint64(1_750_000_000_000) + seq*3
	buf = binary.BigEndian.AppendUint64(buf, ts)
	buf = binary.BigEndian.AppendUint64(buf, ts+30_000)
	buf = binary.BigEndian.AppendUint64(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, ts+4*86_400_000)
	buf = binary.BigEndian.AppendUint32(buf, uint32(seq/60_000))
	buf = binary.BigEndian.AppendUint32(buf, uint32(seq%60_000)*1100)
	h := (q*0x9e3779b97f4a7c15 ^ seq) * 0xbf58476d1ce4e5b9
	buf = binary.LittleEndian.AppendUint64(buf, h)
	return binary.LittleEndian.AppendUint64(buf, h*0x94d049bb133111eb)
}

const benchQueues = 10

// fillStore puts n messages spread over benchQueues queues, in batches of
// 100,000, and returns the store (open).
func fillStore(tb testing.TB, dir string, opts Options, n int) *Store {
	tb.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	b := s.NewBatch()
	var val []byte
	for i := 0; i < n; i++ {
		q, seq := uint64(i%benchQueues), uint64(i/benchQueues)
		val = benchValue(val, q, seq)
		b.PutMessage(q, seq, val)
		if b.Len() == 100_000 || i == n-1 {
			b.SetPosition(uint64(i + 1))
			if err := s.Commit(b); err != nil {
				tb.Fatal(err)
			}
			b.Reset()
		}
	}
	return s
}

// settledStore builds a store of n messages and flattens its LSM tree, so
// that no compaction left over from the bulk load runs during a
// measurement (after a bulk load Badger rebalances the tree for a while).
func settledStore(tb testing.TB, dir string, n int) *Store {
	tb.Helper()
	s := fillStore(tb, dir, Options{}, n)
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// procStatus returns the named fields of /proc/self/status in KiB (zero
// where unavailable).
func procStatus(fields ...string) map[string]int64 {
	out := make(map[string]int64, len(fields))
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, f := range fields {
			if rest, ok := strings.CutPrefix(line, f+":"); ok {
				v := strings.Fields(rest)
				if len(v) > 0 {
					out[f], _ = strconv.ParseInt(v[0], 10, 64)
				}
			}
		}
	}
	return out
}

// BenchmarkCommit measures Commit throughput: each iteration commits one
// batch of new 60-byte messages plus a position ("put"), or, for "churn",
// as many puts as deletes of the oldest messages against an index kept at
// 1,000,000 messages (the checkpointer's steady state). It reports
// entries/s and the process's peak RSS seen after a commit.
func BenchmarkCommit(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
		churn bool
	}{
		{"put/batch=1000", 1000, false},
		{"put/batch=100000", 100_000, false},
		{"churn/batch=100000", 100_000, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{}
			dir := b.TempDir()
			head, tail := 0, 0 // messages [head, tail) are in the index
			var s *Store
			if bc.churn {
				tail = 1_000_000
				s = fillStore(b, dir, opts, tail)
			} else {
				var err error
				if s, err = Open(dir, opts); err != nil {
					b.Fatal(err)
				}
			}
			defer s.Close()
			batch := s.NewBatch()
			var val []byte
			var entries, peakRSS int64
			b.ReportAllocs()
			b.SetBytes(int64(bc.batch) * (messageKeyLen + 60))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch.Reset()
				puts := bc.batch
				if bc.churn {
					puts = bc.batch / 2
				}
				for j := 0; j < puts; j++ {
					q, seq := uint64(tail%benchQueues), uint64(tail/benchQueues)
					val = benchValue(val, q, seq)
					batch.PutMessage(q, seq, val)
					tail++
					if bc.churn {
						batch.DeleteMessage(uint64(head%benchQueues), uint64(head/benchQueues))
						head++
					}
				}
				batch.SetPosition(uint64(tail))
				entries += int64(batch.Len())
				if err := s.Commit(batch); err != nil {
					b.Fatal(err)
				}
				peakRSS = max(peakRSS, procStatus("VmRSS")["VmRSS"])
			}
			b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(peakRSS)/1024, "peak-RSS-MiB")
		})
	}
}

// BenchmarkMessages measures the start-up scan over 1,000,000 messages.
func BenchmarkMessages(b *testing.B) {
	for _, n := range []int{1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			s := settledStore(b, dir, n)
			defer s.Close()
			b.ReportAllocs()
			b.SetBytes(int64(n) * (messageKeyLen + 60))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got := 0
				if err := s.Messages(func(q, seq uint64, v []byte) error {
					got++
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if got != n {
					b.Fatalf("scanned %d messages, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}
