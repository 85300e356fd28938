package bench

// Daemon runs a server binary (smqd) that the bench started itself, so that
// a backlog run can read its resident memory and kill -9 and restart it.
// The caller must Stop it on every exit path; Stop and Kill act on the PID
// of the process this Daemon started, never on a name.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Daemon is a spawned smqd process.
type Daemon struct {
	Bin     string   // path of the smqd binary
	DataDir string   // --data-dir
	Listen  string   // --listen; empty: a free loopback port chosen once
	Args    []string // further flags (e.g. --sync interval)
	LogPath string   // stdout and stderr; empty: <parent of DataDir>/smqd.log
	Env     []string // added to this process's environment (e.g. GOGC=50)

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu
	log *os.File  // guarded by mu
}

// Start starts the process (again, after Kill) without waiting for it to
// serve; see WaitReady.
func (d *Daemon) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return errors.New("bench: daemon already running")
	}
	if d.Listen == "" {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return err
		}
		d.Listen = addr
	}
	if d.LogPath == "" {
		d.LogPath = filepath.Join(filepath.Dir(filepath.Clean(d.DataDir)), "smqd.log")
	}
	if err := os.MkdirAll(filepath.Dir(d.LogPath), 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"--listen", d.Listen, "--data-dir", d.DataDir}, d.Args...)
	cmd := exec.Command(d.Bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if len(d.Env) > 0 {
		cmd.Env = append(os.Environ(), d.Env...)
	}
	cmd.SysProcAttr = daemonSysProcAttr()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start %s: %w", d.Bin, err)
	}
	d.cmd, d.log = cmd, lf
	return nil
}

// PID returns the running process's id, or 0.
func (d *Daemon) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Addr returns the address the daemon listens on.
func (d *Daemon) Addr() string { return d.Listen }

// WaitReady polls GET /healthz until it answers 200 or timeout passes.
func (d *Daemon) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	url := "http://" + d.Listen + "/healthz"
	for {
		st, _, err := fasthttp.GetTimeout(nil, url, time.Second)
		if err == nil && st == 200 {
			return nil
		}
		if d.PID() == 0 {
			return errors.New("bench: daemon is not running")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: daemon not ready after %v (last: %d %v); see %s", timeout, st, err, d.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL to the process and reaps it.
func (d *Daemon) Kill() error { return d.stop(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits up to timeout, then SIGKILL. It is a no-op
// when the process is not running.
func (d *Daemon) Stop(timeout time.Duration) error { return d.stop(syscall.SIGTERM, timeout) }

func (d *Daemon) stop(sig syscall.Signal, timeout time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	cmd := d.cmd
	d.cmd = nil
	defer func() {
		d.log.Close()
		d.log = nil
	}()
	done := make(chan error, 1)
	if err := cmd.Process.Signal(sig); err != nil {
		// Already gone, or a system without the signal (Windows has no
		// SIGTERM): kill it so that Wait returns.
		cmd.Process.Kill()
		cmd.Wait()
		return nil
	}
	go func() { done <- cmd.Wait() }()
	if sig == syscall.SIGKILL {
		<-done
		return nil
	}
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("bench: daemon did not stop within %v; killed", timeout)
	}
}

// Credentials reads the first "<id> <secret>" line of the daemon's
// credentials file.
func (d *Daemon) Credentials() (id, secret string, err error) {
	return ReadCredentials(filepath.Join(d.DataDir, "credentials"))
}

// ReadCredentials reads the first key of an smqd credentials file (lines
// "<id> <secret>"; '#' comments and blank lines skipped).
func ReadCredentials(path string) (id, secret string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			return f[0], f[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", fmt.Errorf("%s holds no access key", path)
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}
