package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/archive"
)

// A cluster's backup, restored on every member of a new cluster (new
// directories, new addresses), gives back what was acknowledged before it
// was taken (backup.go invariant 1): the queues of every shard, their
// messages with their bodies and states (received ones stay invisible),
// a topic with its subscription and MessageCount, not a deleted queue,
// and the files it named. The new cluster then takes new messages, whose
// ids collide with none restored (invariant 3). A send acknowledged after
// the backup is not in it.
func TestClusterBackupRestoresIntoANewCluster(t *testing.T) {
	const shards = 4
	c := newTestCluster(t, 3, shards)
	queues := []string{"q0", "q1", "q2", "q3", "q4", "q5"}
	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Hour
	for _, name := range append(slices.Clone(queues), "gone") {
		c.onLeaderIdempotent(name, func(b *engine.Broker) error { _, err := b.CreateQueue(name, cfg); return err })
	}
	if c.nodes[0].ShardOf("q0") == c.nodes[0].ShardOf("q1") && c.nodes[0].ShardOf("q1") == c.nodes[0].ShardOf("q2") {
		t.Fatal("the queues share a shard: the test would not cover several")
	}
	want := map[string][]string{} // the bodies each queue holds
	for _, name := range queues {
		for k := range 10 {
			body := fmt.Sprintf("%s-%d", name, k)
			c.onLeader(name, func(b *engine.Broker) error {
				q, err := b.Queue(name)
				if err == nil {
					_, err = q.Send([]engine.SendEntry{{Body: []byte(body)}}, nil)
				}
				return err
			})
			want[name] = append(want[name], body)
		}
	}
	inflight := map[string]bool{} // q0's received bodies, invisible for an hour
	c.onLeader("q0", func(b *engine.Broker) error {
		q, err := b.Queue("q0")
		if err != nil {
			return err
		}
		msgs, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 3}, nil)
		if err == nil && len(msgs) != 3 {
			err = fmt.Errorf("received %d", len(msgs))
		}
		for _, m := range msgs {
			inflight[string(m.Body)] = true
		}
		return err
	})
	c.onLeaderIdempotent("t", func(b *engine.Broker) error { _, err := b.CreateTopic("t", engine.DefaultTopicConfig()); return err })
	c.onLeaderIdempotent("t", func(b *engine.Broker) error {
		_, err := b.Subscribe("t", "s", engine.SubscriptionConfig{Endpoint: "http://127.0.0.1:9/hook"})
		return err
	})
	for range 5 {
		c.onLeader("t", func(b *engine.Broker) error {
			_, err := b.Publish("t", engine.PublishInput{Body: []byte("p")})
			return err
		})
	}
	c.onLeader("gone", func(b *engine.Broker) error { return b.DeleteQueue("gone") })
	if err := os.WriteFile(filepath.Join(c.dirs[1], "creds"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}

	var backup bytes.Buffer
	info, err := c.nodes[1].Backup(&backup, BackupOptions{Files: []string{"creds", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Shards != shards || info.Files != 1 || info.Bytes != int64(backup.Len()) {
		t.Fatalf("backup info %+v, %d bytes", info, backup.Len())
	}
	c.onLeader("q1", func(b *engine.Broker) error {
		q, err := b.Queue("q1")
		if err == nil {
			_, err = q.Send([]engine.SendEntry{{Body: []byte("after")}}, nil)
		}
		return err
	})
	c.stopAll()

	n := restoredCluster(t, backup.Bytes(), shards, func(dir string, ri RestoreInfo) {
		if ri.Shards != shards || ri.Files != 1 || ri.Queues != len(queues) || ri.Messages != int64(10*len(queues)) {
			t.Fatalf("restore info %+v", ri)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "creds")); err != nil || string(b) != "secret" {
			t.Fatalf("the restored file: %q, %v", b, err)
		}
	})

	for _, name := range queues {
		eventually(t, "the restored "+name, func() error {
			info, err := n.counts(0, name)
			if err != nil {
				return err
			}
			wantInactive := int64(0)
			if name == "q0" {
				wantInactive = 3
			}
			if info.Active+info.Inactive != 10 || info.Inactive != wantInactive {
				return fmt.Errorf("active %d, inactive %d", info.Active, info.Inactive)
			}
			return nil
		})
	}
	// Every body, once; new sends take new ids.
	seen := map[engine.MessageID]bool{}
	for _, name := range queues {
		n.onLeader(name, func(b *engine.Broker) error {
			q, err := b.Queue(name)
			if err == nil {
				_, err = q.Send([]engine.SendEntry{{Body: []byte("new")}, {Body: []byte("new")}}, nil)
			}
			return err
		})
		var got []string
		for _, m := range n.drain(name) {
			if seen[m.ID] {
				t.Fatalf("%s: message id %v twice", name, m.ID)
			}
			seen[m.ID] = true
			got = append(got, string(m.Body))
		}
		wantNow := []string{"new", "new"}
		for _, body := range want[name] {
			if !inflight[body] { // the three received stay invisible
				wantNow = append(wantNow, body)
			}
		}
		slices.Sort(got)
		slices.Sort(wantNow)
		if !slices.Equal(got, wantNow) {
			t.Fatalf("%s holds %v, want %v", name, got, wantNow)
		}
	}
	n.onLeader("t", func(b *engine.Broker) error {
		ti, err := b.GetTopicAttributes("t")
		if err == nil && ti.MessageCount != 5 {
			err = fmt.Errorf("MessageCount %d, want 5", ti.MessageCount)
		}
		if err == nil {
			_, err = b.GetSubscriptionAttributes("t", "s")
		}
		return err
	})
	if _, err := n.counts(0, "gone"); !errors.Is(err, engine.ErrQueueNotExist) {
		t.Fatalf("the deleted queue: %v", err)
	}
}

// A restore refuses a target that is not empty, an archive cut short (it
// leaves nothing behind), another shard count, and a single node's
// backup.
func TestClusterRestoreRefuses(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	var backup bytes.Buffer
	if _, err := c.nodes[0].Backup(&backup, BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := c.config(0)
	full := filepath.Join(t.TempDir(), "full")
	if err := os.WriteFile(full+".x", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(full, 0o700)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	if _, err := Restore(bytes.NewReader(backup.Bytes()), full, cfg); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a restore into a directory that is not empty: %v", err)
	}
	cut := filepath.Join(t.TempDir(), "cut")
	_, err := Restore(bytes.NewReader(backup.Bytes()[:backup.Len()-10]), cut, cfg)
	if !errors.Is(err, archive.ErrDamaged) {
		t.Fatalf("a restore of an archive cut short: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(cut)); len(ents) != 0 {
		t.Fatalf("a failed restore left %v behind", ents)
	}
	other := cfg
	other.Shards = 3
	if _, err := Restore(bytes.NewReader(backup.Bytes()), filepath.Join(t.TempDir(), "d"), other); err == nil || !strings.Contains(err.Error(), "shards") {
		t.Fatalf("a restore with another shard count: %v", err)
	}
	var single bytes.Buffer
	b, err := engine.Open(engine.Options{Dir: t.TempDir(), FreeSpaceReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Backup(&single, engine.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := Restore(&single, filepath.Join(t.TempDir(), "s"), cfg); err == nil || !strings.Contains(err.Error(), "single node") {
		t.Fatalf("a restore of a single node's backup: %v", err)
	}
}

// A shard's state comes from its leader only (backup.go invariant 1): a
// follower refuses to export it for a backup, whose state may lag what
// was acknowledged. A backup through a node whose view of a shard's
// leader is stale (the leader just stopped) tries again until a new
// leader exports it.
func TestClusterBackupFromLeadersOnly(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 2, infoLogs: true})
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	li, _ := c.leader("q")
	follower := c.nodes[(li+1)%3].Broker(c.nodes[0].ShardOf("q"))
	if err := follower.ExportStateLeading(&bytes.Buffer{}); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("a follower's export for a backup: %v", err)
	}
	via := (li + 1) % 3
	c.stop(li)
	var backup bytes.Buffer
	info, err := c.nodes[via].Backup(&backup, BackupOptions{})
	if err != nil || info.Shards != 2 {
		t.Fatalf("a backup while a leader is gone: %+v, %v", info, err)
	}
	ar, err := archive.NewReader(&backup)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := ar.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// A backup waiting for a shard's leader (none: two of three members are
// down) ends once its client hangs up (BackupOptions.Cancel), with the
// error that says so. It waited out its 30 s (backupLeaderWait) all the
// same, holding the backup slot and the hold on dead-letter moves.
func TestClusterBackupLeaderWaitEndsOnCancel(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	li, _ := c.leader("q")
	via := (li + 1) % 3
	c.stop(li)
	c.stop((li + 2) % 3)
	cancel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.nodes[via].Backup(io.Discard, BackupOptions{Cancel: cancel})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // into the leader wait
	close(cancel)
	if err := <-done; !errors.Is(err, errBackupCanceled) {
		t.Fatalf("a backup canceled while it waits for a leader: %v", err)
	}
}

// A capped backup writes a shard's state in pieces of about a quarter
// second's worth (rateWriter), each once the rate allows. It wrote each
// 1 MiB frame at once and then slept its whole debt: at 10 KB/s the client
// got no byte for 100 s, and smqctl's 30 s --timeout ended the backup
// (backups audit, 2026-12-07; seen failing with "largest write 65536
// bytes" before the fix). Two seconds' worth as one frame.
func TestClusterBackupRateCapPacesEvenly(t *testing.T) {
	const rate = 32 << 10
	sink := &largestWriter{}
	rw := &rateWriter{w: sink, rate: rate, start: time.Now()}
	frame := make([]byte, 2*rate)
	if n, err := rw.Write(frame); n != len(frame) || err != nil {
		t.Fatalf("a capped write of %d bytes: wrote %d, %v", len(frame), n, err)
	}
	if sink.n != len(frame) || sink.largest > rate/4 {
		t.Fatalf("%d bytes at %d a second: largest write %d bytes (want at most %d), %d bytes in all",
			len(frame), rate, sink.largest, rate/4, sink.n)
	}
	cancel := make(chan struct{})
	close(cancel)
	rw = &rateWriter{w: sink, rate: rate, start: time.Now(), cancel: cancel}
	if _, err := rw.Write(frame); !errors.Is(err, errBackupCanceled) {
		t.Fatalf("a capped write once its backup was canceled: %v", err)
	}
}

// largestWriter counts what is written and keeps the largest write.
type largestWriter struct{ n, largest int }

func (w *largestWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	w.largest = max(w.largest, len(p))
	return len(p), nil
}

// Under load, a backup holds every send acknowledged before it was called
// (backup.go invariant 1), and nothing that was never sent: writers send
// to queues on every shard while the backup runs through a node that does
// not lead all of them, and the backup, restored into a new cluster, holds
// every body acknowledged before the call. (Exported by followers
// instead, it still passed 3 runs of 3: followers here apply within a
// round trip. TestClusterBackupFromLeadersOnly shows the leader rule.)
func TestClusterBackupUnderLoad(t *testing.T) {
	const shards = 4
	c := newTestCluster(t, 3, shards)
	var queues []string
	for k := range 4 {
		name := fmt.Sprint("load", k)
		c.onLeaderIdempotent(name, func(b *engine.Broker) error { _, err := b.CreateQueue(name, engine.DefaultQueueConfig()); return err })
		queues = append(queues, name)
	}
	var mu sync.Mutex
	acked, sent := map[string]bool{}, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, name := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%d", w, i)
				mu.Lock()
				sent[body] = true
				mu.Unlock()
				_, b := c.leader(name)
				q, err := b.Queue(name)
				if err == nil {
					_, err = q.Send([]engine.SendEntry{{Body: []byte(body)}}, nil)
				}
				if err == nil {
					mu.Lock()
					acked[body] = true
					mu.Unlock()
				}
			}
		}()
	}
	// The backup starts once the load has: at least 20 sends acknowledged
	// (a fixed 300 ms was too short on a loaded machine under -race).
	eventuallyWithin(t, 60*time.Second, "20 sends acknowledged before the backup", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 20 {
			return fmt.Errorf("%d so far", len(acked))
		}
		return nil
	})
	mu.Lock()
	before := maps.Clone(acked)
	mu.Unlock()
	var backup bytes.Buffer
	_, err := c.nodes[0].Backup(&backup, BackupOptions{})
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	c.stopAll()

	n := restoredCluster(t, backup.Bytes(), shards, nil)
	restored := map[string]bool{}
	for _, name := range queues {
		for _, m := range n.drain(name) {
			restored[string(m.Body)] = true
		}
	}
	for body := range before {
		if !restored[body] {
			t.Errorf("%s, acknowledged before the backup, is not in it", body)
		}
	}
	for body := range restored {
		if !sent[body] {
			t.Errorf("%s is in the backup and was never sent", body)
		}
	}
	t.Logf("%d sends acknowledged before the backup, %d in it", len(before), len(restored))
}

// restoredCluster restores backup on each member of a new 3-node cluster
// (new directories, new addresses), calls check (if set) with each
// member's directory and what its restore said, and starts the cluster.
func restoredCluster(t *testing.T, backup []byte, shards int, check func(dir string, ri RestoreInfo)) *testCluster {
	t.Helper()
	n := &testCluster{t: t, nodes: make([]*Node, 3), shards: shards, addrs: map[uint64]string{}}
	for i := range n.nodes {
		n.dirs = append(n.dirs, filepath.Join(t.TempDir(), fmt.Sprint(i+1)))
		n.hold(uint64(i + 1))
	}
	t.Cleanup(n.stopAll)
	for i := range n.nodes {
		ri, err := Restore(bytes.NewReader(backup), n.dirs[i], n.config(i))
		if err != nil {
			t.Fatal(err)
		}
		if check != nil {
			check(n.dirs[i], ri)
		}
	}
	n.startAll()
	return n
}

// drain receives every visible message of queue, on its leader.
func (c *testCluster) drain(queue string) []engine.Message {
	c.t.Helper()
	var out []engine.Message
	for {
		var msgs []engine.Message
		c.onLeader(queue, func(b *engine.Broker) error {
			q, err := b.Queue(queue)
			if err == nil {
				msgs, err = q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
			}
			if errors.Is(err, engine.ErrMessageNotExist) {
				return nil // drained
			}
			return err
		})
		if len(msgs) == 0 {
			return out
		}
		out = append(out, msgs...)
	}
}
