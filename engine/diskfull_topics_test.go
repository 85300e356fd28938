package engine

// docs/operations.md, "Failure modes", disk fills up: what a full disk
// refuses (acceptNew: sends, publishes, queue and topic creation, a dead
// letter moved in) and what still works. The row said "sends and
// CreateQueue: 503 DiskFull; everything else works", but publishes and
// CreateTopic are refused too; TestDiskFullGuard checks sends, CreateQueue
// and the operations on messages, not topics.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

func TestDiskFullRefusesPublishesAndTopicCreation(t *testing.T) {
	dir := t.TempDir()
	fs := wal.NewMemFS()
	fs.SetCapacity(8 << 20)
	clk := NewFakeClock(t0)
	b, err := Open(diskFullOptions(t, dir, fs, clk))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.Retention = MaxRetention
	q := mustQueue(t, b, "full", cfg)
	mustQueue(t, b, "other", cfg)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 4000)
	var sendErr error
	for i := 0; i < 10_000 && sendErr == nil; i++ {
		entries := make([]SendEntry, MaxBatch)
		for k := range entries {
			entries[k].Body = []byte(fmt.Sprintf("%06d-%d-%s", i, k, body))
		}
		_, sendErr = q.Send(entries, nil)
		clk.Advance(150 * time.Millisecond) // the space job samples
	}
	if !errors.Is(sendErr, ErrDiskFull) {
		t.Fatalf("sends on a filling disk ended with %v, want ErrDiskFull", sendErr)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("hello")}); !errors.Is(err, ErrDiskFull) {
		t.Errorf("a publish on a full disk: %v, want ErrDiskFull", err)
	}
	if _, err := b.CreateTopic("t2", DefaultTopicConfig()); !errors.Is(err, ErrDiskFull) {
		t.Errorf("a topic creation on a full disk: %v, want ErrDiskFull", err)
	}
	if err := b.DeleteQueue("other"); err != nil {
		t.Errorf("a queue deletion on a full disk: %v", err)
	}
}
