package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/archive"
)

// GET /backup streams a backup that restores into a broker holding what
// was sent; only a signed request gets it.
func TestBackupOverHTTP(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte("testid=testsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := startEnv(t, envConfig{
		engineOpts: func(o *engine.Options) { o.Dir = dir },
		serverOpts: func(o *Options) { o.BackupFiles = []string{"credentials", "push-signing.key"} },
	})
	c := env.client()
	defer c.close()
	c.mustCreate("bq")
	for _, body := range []string{"one", "two", "three"} {
		c.mustSend("bq", body, "")
	}
	m := c.mustReceive("bq") // stays inactive: in the backup as such

	// Refused: unsigned, signed with a wrong secret, another method.
	wantError(t, c.do(req{method: "GET", target: "/backup", noSign: true}), 400, "MissingAuthorizationHeader")
	bad := env.client()
	bad.secret = "wrong"
	wantError(t, bad.get("/backup"), 403, "SignatureDoesNotMatch")
	bad.close()
	wantError(t, c.do(req{method: "POST", target: "/backup", body: "<x/>"}), 400, "InvalidRequestURL")
	// One at a time.
	env.srv.backups.since.Store(monoNow()) // the slot (backup.go)
	wantError(t, c.get("/backup"), 503, "ServiceUnavailable")
	env.srv.backups.since.Store(0)

	wantError(t, c.get("/backup?rate=fast"), 400, "InvalidArgument")
	wantError(t, c.get("/backup?rate=0"), 400, "InvalidArgument")
	r := c.get("/backup?rate=100000000")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	rdir := filepath.Join(t.TempDir(), "restored")
	info, err := engine.Restore(bytes.NewReader(r.body), rdir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Files != 1 {
		t.Errorf("restored %d files besides the engine's, want 1 (credentials; no push key here)", info.Files)
	}
	if data, err := os.ReadFile(filepath.Join(rdir, "credentials")); err != nil || string(data) != "testid=testsecret\n" {
		t.Errorf("credentials restored: %q %v", data, err)
	}
	b, err := engine.Open(engine.Options{Dir: rdir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q, err := b.Queue("bq")
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := q.Attributes(); a.Active != 2 || a.Inactive != 1 {
		t.Fatalf("restored queue: %d active, %d inactive; want 2 and 1 (%s received)", a.Active, a.Inactive, m.MessageId)
	}
	// The server goes on, and counts the backup.
	c.mustSend("bq", "after", "")
	metrics := string(c.get("/metrics").body)
	for _, line := range []string{"smqd_backups_total 1", "smqd_backups_failed_total 0"} {
		if !strings.Contains(metrics, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if strings.Contains(metrics, "\nsmqd_backup_last_success_timestamp_seconds 0\n") {
		t.Error("no last backup time on /metrics")
	}

	// A cut archive is refused by the restore.
	if _, err := engine.Restore(bytes.NewReader(r.body[:len(r.body)-1]), filepath.Join(t.TempDir(), "cut")); !errors.Is(err, archive.ErrDamaged) {
		t.Fatalf("a cut backup: %v", err)
	}
}

func TestBackupRefusedInMemory(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	e := wantError(t, c.get("/backup"), 400, "InvalidRequestURL")
	if !bytes.Contains([]byte(e.Message), []byte("in memory")) {
		t.Errorf("message %q", e.Message)
	}
}
