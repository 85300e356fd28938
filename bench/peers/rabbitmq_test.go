package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/bench"
)

// TestRabbitURLs checks the address forms: host:port gets guest's
// credentials, URLs pass, several are split, an empty list is refused.
func TestRabbitURLs(t *testing.T) {
	urls, err := rabbitURLs("127.0.0.1:5672, amqp://u:p@127.0.0.1:5673/v,127.0.0.1:5674")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"amqp://guest:guest@127.0.0.1:5672/", "amqp://u:p@127.0.0.1:5673/v", "amqp://guest:guest@127.0.0.1:5674/"}
	if strings.Join(urls, " ") != strings.Join(want, " ") {
		t.Fatalf("urls %q, want %q", urls, want)
	}
	if tg, _ := NewRabbitMQTarget("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"); tg.Name() != "rabbitmq3" {
		t.Fatalf("a 3-node target is named %q", tg.Name())
	}
	if _, err := rabbitURLs(" , "); err == nil {
		t.Fatal("no address accepted")
	}
	if _, err := NewRabbitMQTarget("amqp://127.0.0.1:notaport"); err == nil {
		t.Fatal("a bad URL accepted")
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startRabbit starts a one-node RabbitMQ (Debian's rabbitmq-server, run as
// the current user from /usr/lib/rabbitmq/bin, or SMQBENCH_RABBITMQ_SERVER)
// on loopback with its own epmd, Erlang cookie and data in a temp dir, and
// stops both by PID at cleanup. It skips under -short (a node takes
// seconds to boot) and when RabbitMQ or epmd is not installed, as on a
// fresh CI machine; bench/peers.sh installs them with apt-get.
func startRabbit(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts rabbitmq-server")
	}
	server := os.Getenv("SMQBENCH_RABBITMQ_SERVER")
	if server == "" {
		server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	}
	if _, err := os.Stat(server); err != nil {
		t.Skipf("rabbitmq-server not installed: %v", err)
	}
	epmd, err := exec.LookPath("epmd")
	if err != nil {
		t.Skip("epmd not installed")
	}
	dir := t.TempDir()
	epmdPort, amqpPort, distPort := freePort(t), freePort(t), freePort(t)
	ep := exec.Command(epmd, "-address", "127.0.0.1", "-port", strconv.Itoa(epmdPort))
	if err := ep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Process.Kill(); ep.Wait() })
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "home"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%d\n", amqpPort)), 0o644))
	node := fmt.Sprintf("smqtest%d@localhost", amqpPort)
	cmd := exec.Command(server)
	cmd.Env = append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"ERL_EPMD_PORT="+strconv.Itoa(epmdPort),
		"RABBITMQ_NODENAME="+node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "beam.pid"),
	)
	out, err := os.Create(filepath.Join(dir, "out.log"))
	must(err)
	cmd.Stdout, cmd.Stderr = out, out
	must(cmd.Start())
	// The script runs beam.smp as its child and writes its PID to the PID
	// file; stop the node by that PID, then the script.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "beam.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", amqpPort)
	deadline := time.Now().Add(90 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "out.log"))
			t.Fatalf("rabbitmq-server does not listen on %s:\n%s", addr, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPeerRabbitMQ runs the shared short cycle and backlog against a real
// one-node RabbitMQ with quorum queues, then checks the RabbitMQ specifics:
// a message received and not acked comes back once its client's connection
// closes (RabbitMQ's redelivery), an acked one does not, and priorities
// are refused as unsupported.
func TestPeerRabbitMQ(t *testing.T) {
	addr := startRabbit(t)
	tg, err := NewRabbitMQTarget(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	runPeer(t, tg)

	ctx := context.Background()
	if err := tg.Prepare(ctx, []string{"redeliver"}, true); err != nil {
		t.Fatal(err)
	}
	a, err := tg.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tg.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	body := []byte("0000000000000001-redelivered")
	if n, err := a.Send(ctx, 0, []bench.Outgoing{{Body: body}, {Body: body}, {Body: body}}); n != 3 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	if _, err := a.Send(ctx, 0, []bench.Outgoing{{Body: body, Priority: 1}}); !errors.Is(err, bench.ErrUnsupported) {
		t.Fatalf("priority: %v, want ErrUnsupported", err)
	}
	var got []string
	fn := func(b []byte) { got = append(got, string(b)) }
	if n, err := a.Receive(ctx, 0, 3, 5*time.Second, fn); n < 1 || err != nil {
		t.Fatalf("receive: %d %v", n, err)
	}
	for a.Pending() < 3 {
		if _, err := a.Receive(ctx, 0, 3, 5*time.Second, fn); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := tg.Backlog(ctx, 0); n != 3 || err != nil {
		t.Fatalf("backlog %d %v, want 3 (unacked)", n, err)
	}
	if n, err := a.Delete(ctx, 1); n != 1 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	// a dies with two unacked: they go back to the queue, and to b.
	a.Close()
	for b.Pending() < 2 {
		if n, err := b.Receive(ctx, 0, 16, 5*time.Second, fn); err != nil || n == 0 {
			t.Fatalf("redelivery: %d %v (pending %d)", n, err, b.Pending())
		}
	}
	if n, err := b.Receive(ctx, 0, 16, 300*time.Millisecond, fn); n != 0 || err != nil {
		t.Fatalf("an acked message came back: %d %v", n, err)
	}
	for _, g := range got {
		if g != string(body) {
			t.Fatalf("body came back as %q", g)
		}
	}
	if n, err := b.Delete(ctx, 2); n != 2 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	// The ack has no reply: wait until the queue has settled it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := tg.Backlog(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d after the deletes", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
