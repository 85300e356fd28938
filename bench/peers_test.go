package bench

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

func runPeer(t *testing.T, target Target) {
	for _, w := range []Workload{Cycle, Backlog} {
		cfg := smokeConfig(w)
		cfg.PriorityMix = nil
		if w == Backlog {
			cfg.Messages = 2000
		}
		res, err := Run(context.Background(), target, cfg)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		checkResult(t, res)
	}
}

func TestPeerBeanstalkd(t *testing.T) {
	port := startPeer(t, "beanstalkd", func(port int, dir string) []string {
		return []string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "-b", dir, "-f", "0"}
	})
	runPeer(t, NewBeanstalkTarget(fmt.Sprintf("127.0.0.1:%d", port), 30*time.Second))
}

func TestPeerRedis(t *testing.T) {
	port := startPeer(t, "redis-server", func(port int, dir string) []string {
		return []string{"--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir, "--appendonly", "yes", "--appendfsync", "always", "--save", ""}
	})
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
