package server

import (
	"testing"
)

// DELETE /backup ends the backup running on the node: a client that stays
// connected and reads slowly held the one backup slot (and, in a cluster,
// every member's dead-letter moves) for as long as it liked, and only a
// restart of the node ended it. Its archive is cut (no end frame), the
// slot is free again, and a DELETE with none running is 404
// BackupNotRunning. Seen failing with cancelBackup answering 204 without
// closing the backup's stop channel: the slot still held 20 s later.
func TestCancelBackupEndsTheRunningOne(t *testing.T) {
	env, c := durableBackupEnv(t)
	defer c.close()

	wantError(t, c.del("/backup", ""), 404, "BackupNotRunning")

	// A client that asked for a capped backup and reads nothing: it holds
	// the slot for hours.
	startCappedBackup(t, env, c)
	wantError(t, c.get("/backup"), 503, "ServiceUnavailable")

	wantStatus(t, c.del("/backup", ""), 204)
	waitSlotFree(t, env, "a cancelled backup still holds the backup slot")
	if n := env.srv.backups.failed.Load(); n != 1 {
		t.Errorf("smqd_backups_failed_total %d, want 1 (the cancelled one)", n)
	}
	if r := c.get("/backup"); r.status != 200 {
		t.Fatalf("the next backup: %d %s", r.status, r.body)
	}
	wantError(t, c.del("/backup", ""), 404, "BackupNotRunning")
}
