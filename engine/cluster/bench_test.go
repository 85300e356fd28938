package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// BenchmarkClusterSend: sends of batches through one shard's leader of an
// in-process 3-node cluster (sync always), 8 senders; ns/op is per batch.
func BenchmarkClusterSend(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			c := newBenchCluster(b, 3, 1)
			defer func() {
				for i := range c.nodes {
					c.stop(i)
				}
			}()
			_, br := c.leader("bench")
			if _, err := br.CreateQueue("bench", engine.DefaultQueueConfig()); err != nil {
				b.Fatal(err)
			}
			q, _ := br.Queue("bench")
			body := make([]byte, 1024)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/8 + 1
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ents := make([]engine.SendEntry, batch)
					for i := range ents {
						ents[i].Body = body
					}
					var res []engine.SendResult
					for i := 0; i < per; i++ {
						t0 := time.Now()
						var err error
						if res, err = q.Send(ents, res[:0]); err != nil {
							b.Error(err)
							return
						}
						sendNS.Add(int64(time.Since(t0)))
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(8*per*batch)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(sendNS.Swap(0))/float64(8*per)/1e3, "µs/send")
			if rs, ok := br.ReplicaStats(); ok && rs.ProposalSeconds.Count > 0 {
				b.ReportMetric(rs.ProposalSeconds.Sum/float64(rs.ProposalSeconds.Count)*1e6, "µs/commit")
			}
		})
	}
}

// newBenchCluster is newTestCluster with production engine options; with
// SMQD_BENCH_CLUSTER_TLS set, with mutual TLS between the nodes; with
// SMQD_BENCH_CLUSTER_SYNC=interval or none, in that sync mode (--sync
// interval with the default 1 s interval) instead of always.
func newBenchCluster(b *testing.B, n, shards int) *testCluster {
	t := &testing.T{}
	c := &testCluster{t: t, prod: true, addrs: map[uint64]string{}, nodes: make([]*Node, n), shards: shards}
	var cfgs []*tls.Config
	if os.Getenv("SMQD_BENCH_CLUSTER_TLS") != "" {
		ca := newTestCA(t, "bench CA")
		cfgs = make([]*tls.Config, n)
		for i := range cfgs {
			cfgs[i] = ca.config(t, fmt.Sprint("node ", i+1), ca.pool)
		}
	}
	mode := engine.SyncAlways
	if s := os.Getenv("SMQD_BENCH_CLUSTER_SYNC"); s != "" {
		var err error
		if mode, err = engine.ParseSyncMode(s); err != nil {
			b.Fatal(err)
		}
	}
	c.cfgTweak = func(i int, cfg *Config) {
		if cfgs != nil {
			cfg.TLS = cfgs[i]
		}
		cfg.SyncAlways = mode == engine.SyncAlways
		cfg.Engine.WAL.Sync = mode
	}
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, filepath.Join(b.TempDir(), fmt.Sprint(i+1)))
		c.hold(uint64(i + 1))
	}
	c.startAll()
	return c
}

var sendNS atomic.Int64

// BenchmarkClusterDeadLetterMove: receives that move messages to the
// dead-letter queue (MaxReceiveCount 1, every message received once
// before the timer starts) through the source shard's leader of an
// in-process 3-node cluster, 8 receivers; the target on the same shard (one
// record per move) or on a shard another node leads (a hop per batch).
// ns/op is per message moved.
func BenchmarkClusterDeadLetterMove(b *testing.B) {
	for _, where := range []string{"same-shard", "other-shard"} {
		b.Run(where, func(b *testing.B) {
			c := newBenchCluster(b, 3, 4)
			defer func() {
				for i := range c.nodes {
					c.stop(i)
				}
			}()
			const src = "bench-src"
			si, br := c.leader(src)
			dlq := ""
			for k := 0; dlq == ""; k++ {
				name := fmt.Sprintf("bench-dlq-%d", k)
				same := c.nodes[si].ShardOf(name) == c.nodes[si].ShardOf(src)
				if li, _ := c.leader(name); same == (where == "same-shard") && (same || li != si) {
					dlq = name
				}
			}
			_, bd := c.leader(dlq)
			if _, err := bd.CreateQueue(dlq, engine.DefaultQueueConfig()); err != nil {
				b.Fatal(err)
			}
			cfg := engine.DefaultQueueConfig()
			cfg.VisibilityTimeout = time.Second
			cfg.DeadLetterQueue, cfg.MaxReceiveCount = dlq, 1
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := br.CreateQueue(src, cfg)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond) // the target not replicated here yet
			}
			q, _ := br.Queue(src)
			body := make([]byte, 1024)
			ents := make([]engine.SendEntry, engine.MaxBatch)
			for i := range ents {
				ents[i].Body = body
			}
			n := (b.N + engine.MaxBatch - 1) / engine.MaxBatch * engine.MaxBatch
			for i := 0; i < n; i += engine.MaxBatch {
				if _, err := q.Send(ents, nil); err != nil {
					b.Fatal(err)
				}
			}
			for got := 0; got < n; {
				ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: engine.MaxBatch}, nil)
				if err != nil {
					b.Fatal(err)
				}
				got += len(ms)
			}
			time.Sleep(1100 * time.Millisecond) // every hide over
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						_, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: engine.MaxBatch}, nil)
						if errors.Is(err, engine.ErrMessageNotExist) {
							// A receive that moved all it took and found
							// no more within its tries answers empty.
							if info, _ := q.Attributes(); info.Active+info.Inactive == 0 {
								return
							}
							continue
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			info, _ := q.Attributes()
			if left := info.Active + info.Inactive; left != 0 {
				b.Fatalf("%d messages not moved", left)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "moves/s")
		})
	}
}

// BenchmarkClusterPublish: publishes of 1 KiB to a topic through its
// shard's leader of an in-process 3-node cluster, 8 publishers, sync
// always. "local": one subscribed queue, on the topic's shard (stored in
// the publish itself). "local+relayed": a second queue on a shard another
// node leads, whose copies are relayed (engine/topic_relay.go); the timer
// runs until every relayed copy is stored there. ns/op is per publish.
func BenchmarkClusterPublish(b *testing.B) {
	for _, subs := range []string{"local", "local+relayed"} {
		b.Run(subs, func(b *testing.B) {
			c := newBenchCluster(b, 3, 4)
			defer func() {
				for i := range c.nodes {
					c.stop(i)
				}
			}()
			const topic = "bench-topic"
			ti, bt := c.leader(topic)
			var near, far string
			for k := 0; near == "" || far == ""; k++ {
				name := fmt.Sprintf("bench-sub-%d", k)
				same := c.nodes[ti].ShardOf(name) == c.nodes[ti].ShardOf(topic)
				if li, _ := c.leader(name); same && near == "" {
					near = name
				} else if !same && li != ti && far == "" {
					far = name
				}
			}
			queues := []string{near}
			if subs == "local+relayed" {
				queues = append(queues, far)
			}
			for _, name := range queues {
				_, bq := c.leader(name)
				if _, err := bq.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := bt.CreateTopic(topic, engine.DefaultTopicConfig()); err != nil {
				b.Fatal(err)
			}
			for _, name := range queues {
				deadline := time.Now().Add(10 * time.Second)
				for {
					_, err := bt.Subscribe(topic, "to-"+name, engine.SubscriptionConfig{Endpoint: "acs:mns:bench:1:queues/" + name, Format: engine.FormatSimplified})
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal(err)
					}
					time.Sleep(10 * time.Millisecond) // the queue not replicated here yet
				}
			}
			_, bf := c.leader(queues[len(queues)-1])
			last, err := bf.Queue(queues[len(queues)-1])
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 1024)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := bt.Publish(topic, engine.PublishInput{Body: body, Owner: "1"}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			published := b.Elapsed()
			deadline := time.Now().Add(time.Minute)
			for {
				info, _ := last.Attributes()
				if info.Active >= int64(b.N) {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d copies in %s after a minute", info.Active, b.N, last.Name())
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/published.Seconds(), "publishes/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "delivered/s")
		})
	}
}

// BenchmarkClusterBackup: a backup of a 3-node, 8-shard cluster in
// process (sync always) holding 100,000 messages of 1 KiB in 8 queues,
// through a node, into a file; then that file restored as one member of
// a new cluster. Run with -benchtime 1x; the figures are per backup.
func BenchmarkClusterBackup(b *testing.B) {
	const queues, perQueue = 8, 12500
	c := newBenchCluster(b, 3, 8)
	defer func() {
		for i := range c.nodes {
			c.stop(i)
		}
	}()
	body := make([]byte, 1024)
	var wg sync.WaitGroup
	for k := range queues {
		name := fmt.Sprint("bk", k)
		_, br := c.leader(name)
		if _, err := br.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
			b.Fatal(err)
		}
		q, _ := br.Queue(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ents := make([]engine.SendEntry, 16)
			for i := range ents {
				ents[i].Body = body
			}
			for sent := 0; sent < perQueue; sent += len(ents) {
				if _, err := q.Send(ents, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		file := filepath.Join(dir, fmt.Sprint("c", i, ".smqd"))
		f, err := os.Create(file)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		info, err := c.nodes[1].Backup(f, BackupOptions{})
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(took.Seconds(), "backup_s")
		b.ReportMetric(float64(info.Bytes)/took.Seconds()/1e6, "backup_MB/s")
		rf, err := os.Open(file)
		if err != nil {
			b.Fatal(err)
		}
		cfg := c.config(0)
		t0 = time.Now()
		ri, err := Restore(rf, filepath.Join(dir, fmt.Sprint("r", i)), cfg)
		rf.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "restore_s")
		b.ReportMetric(float64(ri.Messages), "messages")
	}
}
