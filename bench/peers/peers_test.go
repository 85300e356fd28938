package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/bench"
)

// startPeer starts a peer server binary if it is installed (else skips)
// on a free loopback port, and stops it by PID at cleanup.
func startPeer(t *testing.T, bin string, args func(port int, dir string) []string) int {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a peer server")
	}
	path, err := exec.LookPath(bin)
	// SMQBENCH_NATS_SERVER=/path/to/nats-server and so on.
	if env := os.Getenv("SMQBENCH_" + strings.ToUpper(strings.ReplaceAll(bin, "-", "_"))); env != "" {
		path, err = env, nil
	}
	if err != nil {
		t.Skipf("%s not installed", bin)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(path, args(port, dir)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return port
		}
		if i > 400 {
			t.Fatalf("%s does not listen", bin)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// runPeer runs a short cycle and a small backlog against target.
func runPeer(t *testing.T, target bench.Target) {
	for _, w := range []bench.Workload{bench.Cycle, bench.Backlog} {
		cfg := bench.Config{
			Workload: w, Producers: 2, Consumers: 2, BodyBytes: 256,
			SendBatch: 4, RecvBatch: 4, DeleteBatch: 2, Queues: 2,
			Warmup: 100 * time.Millisecond, Duration: 700 * time.Millisecond,
			Wait: time.Second, MaxTime: 20 * time.Second,
		}
		if w == bench.Backlog {
			cfg.Messages = 2000
		}
		res, err := bench.Run(context.Background(), target, cfg)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		if res.Errors != 0 {
			t.Errorf("%s: %d errors: %s", w, res.Errors, res.ErrorSample)
		}
		switch w {
		case bench.Cycle:
			if res.Sent == 0 || res.Deleted == 0 || res.E2E.Count == 0 {
				t.Errorf("cycle measured nothing: %+v", res)
			}
		case bench.Backlog:
			if res.Drained != res.Preloaded || res.Preloaded != cfg.Messages || res.BacklogEnd != 0 {
				t.Errorf("backlog: preloaded %d drained %d left %d", res.Preloaded, res.Drained, res.BacklogEnd)
			}
		}
	}
}

// TestAll checks that every catalog method is a peer with a name of its
// own, an address and a constructor, and that the constructors need no
// server (they connect in Prepare).
func TestAll(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		if p.Name == "" || p.DefaultAddr == "" || p.New == nil || seen[p.Name] {
			t.Fatalf("bad peer %+v", p)
		}
		seen[p.Name] = true
		tg, err := p.New(bench.PeerOptions{Addr: p.DefaultAddr, Workers: 2, VisibilityTimeout: time.Second})
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if tg.Name() != p.Name {
			t.Errorf("peer %q makes a target named %q", p.Name, tg.Name())
		}
		tg.Close()
	}
	for _, want := range []string{"beanstalkd", "redis", "redis-streams", "nats", "rabbitmq"} {
		if !seen[want] {
			t.Errorf("peer %s missing", want)
		}
	}
}

func TestPeerBeanstalkd(t *testing.T) {
	port := startPeer(t, "beanstalkd", func(port int, dir string) []string {
		return []string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "-b", dir, "-f", "0"}
	})
	runPeer(t, NewBeanstalkTarget(fmt.Sprintf("127.0.0.1:%d", port), 30*time.Second))
}

// redisArgs are redis-server's flags for a test: loopback, an AOF synced
// at every write (the "always" class), no snapshots.
func redisArgs(port int, dir string) []string {
	return []string{"--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir, "--appendonly", "yes", "--appendfsync", "always", "--save", ""}
}

func TestPeerRedis(t *testing.T) {
	port := startPeer(t, "redis-server", redisArgs)
	tg := NewRedisTarget(fmt.Sprintf("127.0.0.1:%d", port), 8)
	defer tg.Close()
	runPeer(t, tg)
}

func TestPeerNATS(t *testing.T) {
	port := startPeer(t, "nats-server", func(port int, dir string) []string {
		conf := filepath.Join(dir, "nats.conf")
		os.WriteFile(conf, []byte(fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q\n sync_interval: always }\n", port, dir)), 0o644)
		return []string{"-c", conf}
	})
	tg := NewNATSTarget(fmt.Sprintf("nats://127.0.0.1:%d", port), 30*time.Second)
	defer tg.Close()
	runPeer(t, tg)
}
