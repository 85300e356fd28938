package engine

import (
	"testing"
	"time"
)

// BenchmarkPurge: a durable broker (sync always) purges a queue of
// 100,000 messages of 1 KiB, 4 stripes, while a sender sends to the same
// queue one message at a time. Reported: messages purged a second (ns/op
// is one purge), and the longest one of those sends took (the stripe lock
// is released between chunks, purge.go invariant 5; a send also waits for
// the fsync of the purge's records ahead of it), and the log's growth per
// message purged.
//
//	go test -run '^$' -bench BenchmarkPurge -benchtime 3x ./engine/
func BenchmarkPurge(b *testing.B) {
	const n = 100_000
	o := Options{Dir: b.TempDir()}
	o.WAL.Sync = SyncAlways
	br, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	q := mustQueue(b, br, "purged", DefaultQueueConfig())
	body := benchBody(1024)
	batch := make([]SendEntry, MaxBatch)
	for i := range batch {
		batch[i] = SendEntry{Body: body}
	}
	var purged int
	var logBytes uint64 // the log's growth during the purges (the sender's few sends included)
	var elapsed, worst time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for sent := 0; sent < n; sent += MaxBatch {
			if _, err := q.Send(batch[:min(MaxBatch, n-sent)], nil); err != nil {
				b.Fatal(err)
			}
		}
		stop := make(chan struct{})
		done := make(chan time.Duration)
		go func() { // a sender beside the purge: how long one waits
			var w time.Duration
			one := batch[:1]
			for {
				select {
				case <-stop:
					done <- w
					return
				default:
				}
				t := time.Now()
				if _, err := q.Send(one, nil); err != nil {
					b.Error(err)
				}
				w = max(w, time.Since(t))
			}
		}()
		end0 := br.Stats().Storage.LogEnd
		b.StartTimer()
		t := time.Now()
		got, err := q.Purge()
		d := time.Since(t)
		b.StopTimer()
		logBytes += br.Stats().Storage.LogEnd - end0
		elapsed += d
		close(stop)
		worst = max(worst, <-done)
		if err != nil || got < n {
			b.Fatalf("Purge: %d, %v", got, err)
		}
		purged += got
		if _, err := q.Purge(); err != nil { // what the sender left
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(purged)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(worst.Microseconds()), "µs-max-send")
	b.ReportMetric(float64(logBytes)/float64(purged), "B-log/msg")
}
