package server

// Kill -9 of a process serving HTTP, with sync "interval" (an hour: its
// timer never fsyncs) and "none": docs/operations.md "Sync modes" answers
// SendMessage and DeleteMessage in these modes once their records are
// written to the OS, so after a kill -9 of the process every send that was
// answered 201 is there and no message whose delete was answered 204
// comes back. The parent re-executes this test binary as the child (an
// engine broker in a directory and a Server on 127.0.0.1:0), drives it
// over HTTP, kills it with SIGKILL at a random moment, starts it again on
// the same directory and drains the queue, deleting what it receives. In
// odd cycles the child writes its log through wal.NewSlowWriteFS, so records wait
// in the log's ring for milliseconds before they are written.

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

const httpKillChildEnv = "SMQD_HTTP_KILL_CHILD_DIR"

func TestHTTPKill9SyncInterval(t *testing.T) { runHTTPKill9(t, "interval") }
func TestHTTPKill9SyncNone(t *testing.T)     { runHTTPKill9(t, "none") }

// httpKillHistory is what the parent knows: every body whose send was
// answered 201, every body whose delete was answered 204, and every body
// a delete was sent for (it may have taken effect though the kill came
// before its answer).
type httpKillHistory struct {
	mu      sync.Mutex
	acked   map[string]bool // body -> send acknowledged
	deleted map[string]bool // body -> delete acknowledged
	tried   map[string]bool // body -> delete sent
	sends   int
}

func runHTTPKill9(t *testing.T, mode string) {
	if os.Getenv(httpKillChildEnv) != "" {
		t.Skip("child process")
	}
	cycles := 12
	if testing.Short() {
		cycles = 4
	}
	delay := 3 * time.Millisecond
	if d := os.Getenv("SMQD_CRASH_WRITE_DELAY"); d != "" {
		var err error
		if delay, err = time.ParseDuration(d); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 1))
	t.Logf("sync %s, seed %d, %d cycles, write delay %v", mode, seed, cycles, delay)
	h := &httpKillHistory{acked: map[string]bool{}, deleted: map[string]bool{}, tried: map[string]bool{}}
	for c := 0; c < cycles; c++ {
		d := time.Duration(0)
		if c%2 == 1 {
			d = delay
		}
		child, env := startHTTPKillChild(t, dir, mode, d)
		if c == 0 {
			r := env.client().put("/queues/kill", `<?xml version="1.0" encoding="UTF-8"?><Queue xmlns="http://mns.aliyuncs.com/doc/v1/"><VisibilityTimeout>1</VisibilityTimeout></Queue>`)
			if r.status != 201 {
				t.Fatalf("create: %s", r)
			}
		} else {
			h.drain(t, env, c)
		}
		h.load(env, c, time.Duration(100+rnd.IntN(300))*time.Millisecond, child)
	}
	child, env := startHTTPKillChild(t, dir, mode, 0)
	h.drain(t, env, cycles)
	child.Process.Kill()
	child.Wait()
	t.Logf("%d sends answered 201, %d deletes answered 204", h.sends, len(h.deleted))
}

// startHTTPKillChild starts the child on dir and returns it with a testEnv
// (for its client only) on its address.
func startHTTPKillChild(t *testing.T, dir, mode string, delay time.Duration) (*exec.Cmd, *testEnv) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHTTPKill9Child$", "-test.v=false")
	cmd.Env = append(os.Environ(), httpKillChildEnv+"="+dir, "SMQD_HTTP_KILL_SYNC="+mode, "SMQD_HTTP_KILL_DELAY="+delay.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			go func() { // keep the pipe drained
				for sc.Scan() {
				}
			}()
			return cmd, &testEnv{t: t, addr: addr, now: time.Now}
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("child died before it listened: %s", stderr.String())
	return nil, nil
}

// load sends from two clients and receives and deletes from two others
// until the child is killed, runFor after it starts.
func (h *httpKillHistory) load(env *testEnv, cycle int, runFor time.Duration, child *exec.Cmd) {
	timer := time.AfterFunc(runFor, func() { child.Process.Signal(syscall.SIGKILL) })
	defer timer.Stop()
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := env.client()
			defer c.close()
			for n := 0; ; n++ {
				body := fmt.Sprintf("c%d-p%d-%d", cycle, p, n)
				r, err := c.doErr(req{method: "POST", target: "/queues/kill/messages", body: sendBody(body, "")})
				if err != nil {
					return // killed
				}
				if r.status == 201 {
					h.mu.Lock()
					h.acked[body] = true
					h.sends++
					h.mu.Unlock()
				}
			}
		}()
	}
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := env.client()
			defer c.close()
			for {
				r, err := c.doErr(req{method: "GET", target: "/queues/kill/messages?numOfMessages=16&waitseconds=1"})
				if err != nil {
					return
				}
				var ms xMessages
				if r.status != 200 || xmlUnmarshal(r.body, &ms) != nil {
					continue
				}
				for _, m := range ms.Messages {
					h.mu.Lock()
					h.tried[m.MessageBody] = true
					h.mu.Unlock()
					r, err := c.doErr(req{method: "DELETE", target: "/queues/kill/messages?ReceiptHandle=" + url.QueryEscape(m.ReceiptHandle)})
					if err != nil {
						return
					}
					if r.status == 204 {
						h.mu.Lock()
						h.deleted[m.MessageBody] = true
						h.mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	child.Wait()
}

// drain receives and deletes every message of the restarted child, failing
// on one whose delete was acknowledged, until every acknowledged send no
// delete was sent for was seen (or, failing the test, 15 s passed: a message received
// before the kill is visible again after the queue's VisibilityTimeout of
// 1 s).
func (h *httpKillHistory) drain(t *testing.T, env *testEnv, cycle int) {
	t.Helper()
	c := env.client()
	defer c.close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		h.mu.Lock()
		var missing []string
		for body := range h.acked {
			if !h.deleted[body] && !h.tried[body] {
				missing = append(missing, body)
			}
		}
		h.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cycle %d: %d sends answered 201 not received after the restart, and no delete sent for them, e.g. %q", cycle, len(missing), missing[:min(5, len(missing))])
		}
		r := c.do(req{method: "GET", target: "/queues/kill/messages?numOfMessages=16&waitseconds=1"})
		if r.status == 404 {
			continue // MessageNotExist
		}
		var ms xMessages
		decode(t, r, &ms)
		for _, m := range ms.Messages { // the load is over: h is this goroutine's
			if h.deleted[m.MessageBody] {
				t.Fatalf("cycle %d: message %s (%s) is back after its delete was answered 204", cycle, m.MessageId, m.MessageBody)
			}
			if r := c.del("/queues/kill/messages?ReceiptHandle="+url.QueryEscape(m.ReceiptHandle), ""); r.status != 204 {
				t.Fatalf("cycle %d: delete %s: %s", cycle, m.MessageId, r)
			}
			h.deleted[m.MessageBody] = true
			delete(h.tried, m.MessageBody) // it was back: deleted now
		}
	}
}

// TestHTTPKill9Child is the child process of TestHTTPKill9Sync*.
func TestHTTPKill9Child(t *testing.T) {
	dir := os.Getenv(httpKillChildEnv)
	if dir == "" {
		t.Skip("only run as the child of TestHTTPKill9Sync*")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	eo := engine.Options{Dir: dir, Logger: log}
	switch mode := os.Getenv("SMQD_HTTP_KILL_SYNC"); mode {
	case "interval":
		eo.WAL.Sync, eo.WAL.SyncInterval = engine.SyncInterval, time.Hour
	case "none":
		eo.WAL.Sync = engine.SyncNone
	default:
		fmt.Fprintln(os.Stderr, "unknown sync mode", mode)
		os.Exit(2)
	}
	if d, _ := time.ParseDuration(os.Getenv("SMQD_HTTP_KILL_DELAY")); d > 0 {
		eo.WAL.FS = wal.NewSlowWriteFS(wal.OSFS(), d)
	}
	b, err := engine.Open(eo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	srv, err := New(b, Options{Credentials: map[string]string{testKeyID: testSecret}, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}()
	// Until killed (bounded: a child nobody kills exits after 60 s).
	time.Sleep(60 * time.Second)
	os.Exit(0)
}
