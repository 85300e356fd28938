package server

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// A capped backup whose client hangs up ends, and frees the one backup
// slot and the log segments it held, without waiting for its paced writes
// to fill the connection's buffers: at ?rate=1 that took about 16 KiB of
// writes, 4.5 hours, through which every other backup was answered 503
// and compaction removed no segment (backup audit, stop 62).
func TestBackupEndsWhenItsClientHangsUp(t *testing.T) {
	env, c := durableBackupEnv(t)
	defer c.close()

	conn := startCappedBackup(t, env, c)
	if v := value(t, scrape(t, c), "smqd_backup_running_seconds"); v <= 0 {
		t.Errorf("smqd_backup_running_seconds %v during a backup", v)
	}
	conn.Close() // the operator gives up on it (^C of smqctl backup)

	waitSlotFree(t, env, "the backup of a client that hung up still holds the backup slot")
	if r := c.get("/backup"); r.status != 200 {
		t.Fatalf("the next backup: %d %s", r.status, r.body)
	}
	if n := env.srv.backups.failed.Load(); n != 1 {
		t.Errorf("smqd_backups_failed_total %d, want 1", n)
	}
	if v := value(t, scrape(t, c), "smqd_backup_running_seconds"); v != 0 {
		t.Errorf("smqd_backup_running_seconds %v with no backup running", v)
	}
}

// The same through a cluster node: its capped backup slept the whole debt
// of each write at once (a frame of up to 1 MiB: days at ?rate=1), and
// meanwhile every member held its dead-letter moves and its topic
// deliveries to other shards (engine/cluster holdmoves.go): a client that
// hung up froze them until the node was restarted (backup audit, stop 62).
func TestClusterBackupEndsWhenItsClientHangsUp(t *testing.T) {
	c := startCluster(t, 3, 2)
	c.ready()
	env := c.envs[0]
	cl := env.client()
	defer cl.close()
	wantStatus(t, cl.put("/queues/hq", ""), 201)
	cl.mustSend("hq", "one", "")

	conn := startCappedBackup(t, env, cl)
	conn.Close()
	waitSlotFree(t, env, "the cluster backup of a client that hung up still holds the backup slot (and every member's moves)")
	if r := cl.get("/backup"); r.status != 200 {
		t.Fatalf("the next backup: %d %.300s", r.status, r.body)
	}
}

// durableBackupEnv starts a durable server with a queue "hq" holding one
// message, and a client of it.
func durableBackupEnv(t *testing.T) (*testEnv, *client) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte("testid=testsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) { o.Dir = dir }})
	c := env.client()
	c.mustCreate("hq")
	c.mustSend("hq", "one", "")
	return env, c
}

// startCappedBackup asks env for a backup at ?rate=1 on a connection of
// its own, and returns once it runs: it would hold the backup slot for
// hours. The status line may not come yet: at this rate the response's
// buffer holds it.
func startCappedBackup(t *testing.T, env *testEnv, c *client) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(c.build(req{method: "GET", target: "/backup?rate=1"}))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !env.srv.backups.running.Load() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !env.srv.backups.running.Load() {
		t.Fatal("no backup running")
	}
	return conn
}

// waitSlotFree waits up to 20 s for env's backup slot to be free (since is
// cleared after running), and fails the test with "<what> 20 s later"
// if it is not.
func waitSlotFree(t *testing.T, env *testEnv, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for env.srv.backups.since.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if env.srv.backups.since.Load() != 0 {
		t.Fatal(what + " 20 s later")
	}
}
