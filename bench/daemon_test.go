package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// buildSmqd builds cmd/smqd into a temp dir.
func buildSmqd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "smqd")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/smqd").CombinedOutput()
	if err != nil {
		t.Fatalf("build smqd: %v\n%s", err, out)
	}
	return bin
}

// TestBacklogRestartCheck spawns smqd, preloads, drains half, kills it with
// SIGKILL, restarts it and checks the count and the drain of the rest.
func TestBacklogRestartCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns smqd")
	}
	bin := buildSmqd(t)
	dir := t.TempDir()
	d := &Daemon{Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "smqd.log")}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(10 * time.Second)
	ctx := context.Background()
	if err := d.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	id, secret, err := d.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	target := NewMNSTarget(MNSOptions{Addr: d.Addr(), AccessKeyID: id, AccessKeySecret: secret})
	defer target.Close()
	cfg := smokeConfig(Backlog)
	cfg.Messages, cfg.RestartCheck, cfg.Daemon = 5000, true, d
	res, err := Run(ctx, target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	if res.RestartMs <= 0 || !res.RestartCountOK || res.RSSBytes <= 0 {
		t.Fatalf("restart check: %+v", res)
	}
	// The drain's CPU, over its part before the kill (the perf audit of
	// 2026-12-06 measured it by hand: backlog reported none).
	if runtime.GOOS == "linux" && (res.ServerCPUUsPerMsg <= 0 || res.ClientCPUUsPerMsg <= 0 || res.ServerPID <= 0 || res.ServerPID == d.PID()) {
		t.Fatalf("drain CPU: server %v µs/msg (pid %d, now %d), smqbench %v µs/msg", res.ServerCPUUsPerMsg, res.ServerPID, d.PID(), res.ClientCPUUsPerMsg)
	}
	t.Logf("restart %.1f ms, counted %d of %d, rss %d", res.RestartMs, res.CountAfterRestart, res.ExpectedAfterRestart, res.RSSBytes)
	pid := d.PID()
	if err := d.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRSS(pid); err == nil {
		t.Fatalf("process %d still there after Stop", pid)
	}
}

// TestSpawnedCycleCPU spawns smqd and runs a short cycle with each client:
// the server's CPU (another process's, from /proc) and smqbench's must be
// present and possible.
func TestSpawnedCycleCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns smqd")
	}
	if runtime.GOOS != "linux" {
		t.Skip("server CPU is read from /proc")
	}
	bin := buildSmqd(t)
	dir := t.TempDir()
	d := &Daemon{Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "smqd.log")}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(10 * time.Second)
	ctx := context.Background()
	if err := d.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	id, secret, err := d.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	opts := MNSOptions{Addr: d.Addr(), AccessKeyID: id, AccessKeySecret: secret}
	for _, client := range []string{"fast", "sdk"} {
		var target Target = NewMNSTarget(opts)
		if client == "sdk" {
			target = NewSDKTarget(opts)
		}
		cfg := smokeConfig(Cycle)
		cfg.Daemon, cfg.Client = d, client
		res, err := Run(ctx, target, cfg)
		target.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, res)
		checkCPU(t, res, true)
		if res.ServerPID != d.PID() {
			t.Fatalf("server pid %d, daemon %d", res.ServerPID, d.PID())
		}
		t.Logf("%s: server %.2f µs/msg (%.2f cores), client %.2f µs/msg (%.2f cores)", client, res.ServerCPUUsPerMsg, res.ServerCores, res.ClientCPUUsPerMsg, res.ClientCores)
	}
}
