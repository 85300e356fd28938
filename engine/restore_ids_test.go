package engine

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// A broker restored from a backup gives no MessageId that the broker the
// backup was taken of gave after it, over that broker's restarts: the
// restored one took the boot counter after the backup's, which the old
// one's first start after the backup had used (backups2 audit,
// 2026-12-07).
func TestRestoreNeverReusesMessageIDs(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	mustQueue(t, b, "q", DefaultQueueConfig())
	old := map[MessageID]string{}
	send := func(b *Broker, body string) MessageID {
		t.Helper()
		q, err := b.Queue("q")
		if err != nil {
			t.Fatal(err)
		}
		res, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].ID
	}
	send(b, "before")
	archive := backupTo(t, b, BackupOptions{})
	// The old broker goes on: sends, and three restarts.
	for run := range 4 {
		for i := range 3 {
			body := fmt.Sprintf("old-run%d-%d", run, i)
			old[send(b, body)] = body
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b = openDurableTest(t, dir, clk, nil)
	}
	b.Close()

	rdir := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(bytes.NewReader(archive), rdir); err != nil {
		t.Fatal(err)
	}
	for run := range 3 {
		r := openDurableTest(t, rdir, clk, nil)
		for i := range 3 {
			body := fmt.Sprintf("restored-run%d-%d", run, i)
			if id := send(r, body); old[id] != "" {
				t.Errorf("the restored broker gave %q MessageId %s, which the old one gave %q after the backup", body, id, old[id])
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
