package cluster

import (
	"fmt"
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

// newBenchCluster is newTestCluster with production engine options.
func newBenchCluster(b *testing.B, n, shards int) *testCluster {
	t := &testing.T{}
	c := &testCluster{t: t, prod: true, addrs: map[uint64]string{}, nodes: make([]*Node, n), shards: shards}
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, filepath.Join(b.TempDir(), fmt.Sprint(i+1)))
		c.hold(uint64(i + 1))
	}
	c.startAll()
	return c
}

var sendNS atomic.Int64
