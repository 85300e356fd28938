package server

import (
	"net"
	"testing"
	"time"
)

// smqd_backup_running_seconds (review V): a refused backup (the slot is
// busy) and one refused before it starts (a bad ?rate) leave the running
// one's figure alone; and whenever the slot is held, the figure is not 0
// (since is set in the body writer's goroutine, after the slot's CAS in
// the handler: a scrape between the two said 0 with a backup running).
func TestBackupRunningSecondsRefusedAndWindow(t *testing.T) {
	env, c := durableBackupEnv(t)
	defer c.close()

	zeroWhileHeld := 0
	for round := 0; round < 20; round++ {
		conn, err := net.Dial("tcp", env.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(c.build(req{method: "GET", target: "/backup?rate=1"}))); err != nil {
			t.Fatal(err)
		}
		// What a scrape would read, as often as it can, until since is set.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			running := env.srv.backups.running.Load()
			since := env.srv.backups.since.Load()
			if running && since == 0 {
				zeroWhileHeld++
			}
			if since != 0 {
				break
			}
		}
		if env.srv.backups.since.Load() == 0 {
			t.Fatal("no backup running")
		}
		if round == 0 {
			if r := c.get("/backup"); r.status != 503 {
				t.Fatalf("a second backup: %d %s", r.status, r.body)
			}
			if r := c.get("/backup?rate=abc"); r.status != 400 {
				t.Fatalf("a bad rate: %d %s", r.status, r.body)
			}
			if v := value(t, scrape(t, c), "smqd_backup_running_seconds"); v <= 0 {
				t.Errorf("smqd_backup_running_seconds %v after a refused backup, with one running", v)
			}
		}
		conn.Close()
		// The slot is free once since is 0 (running is cleared before it:
		// waiting for running alone, a scrape could still find since set;
		// seen once in make test).
		deadline := time.Now().Add(20 * time.Second)
		for env.srv.backups.since.Load() != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if env.srv.backups.since.Load() != 0 {
			t.Fatal("the slot is still held 20 s after the hang-up")
		}
		if v := value(t, scrape(t, c), "smqd_backup_running_seconds"); v != 0 {
			t.Errorf("smqd_backup_running_seconds %v with no backup running", v)
		}
	}
	if zeroWhileHeld > 0 {
		t.Errorf("the slot held with since 0 (a scrape says no backup runs) in %d reads", zeroWhileHeld)
	}
}
