package engine

// Kill -9 test of HTTP push delivery (push.go invariant 1, push_queue.go
// invariant 3): a child process publishes to a topic with one HTTP
// subscription whose endpoint is a receiver in this (parent) process, and
// is killed with SIGKILL at random moments. The receiver fails one push in
// ten (500; at most twice for one notification), so retries are in flight
// at the kills too. After the last cycle a final child only pushes.
// Checked against the whole history:
//
//   - every acknowledged publish is pushed at least once;
//   - every acknowledged publish is in the topic's queue subscription,
//     exactly once (publish.go invariant 1);
//   - nothing that was never published is pushed or queued;
//   - duplicates of pushes (at-least-once) are counted and reported.
//
// Child protocol (stdout): "T <body>" before a publish, "P <body>" once it
// was acknowledged; the final child prints "Q <body>" for every message
// of the queue subscription.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const pushChildEnv = "SMQD_PUSH_CHILD_DIR"

// pushFinalWait bounds the final child's wait for its push backlog: the
// lease of what the last kill left in flight, then up to two refusals'
// retries (1 s, 2 s) and whatever delay the kills' receives added.
const pushFinalWait = 60 * time.Second

func TestPushKill9(t *testing.T) {
	if os.Getenv(pushChildEnv) != "" {
		t.Skip("child process")
	}
	cycles := 5
	if modelLong {
		cycles = 50
	}
	var mu sync.Mutex
	pushed, refused := map[string]int{}, map[string]int{}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))    // the receiver's, under mu
	killAt := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8)) // this goroutine's
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		// At most two refusals per notification, so that its retries
		// (1 s, then 2 s later) stay well inside the final child's time.
		fail := refused[string(body)] < 2 && rnd.IntN(10) == 0
		if fail {
			refused[string(body)]++
		} else {
			pushed[string(body)]++
		}
		mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	dir := t.TempDir()
	tried, acked, queued := map[string]bool{}, map[string]bool{}, map[string]int{}
	run := func(c int, publish bool, runFor time.Duration) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPushKillChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), pushChildEnv+"="+dir, "SMQD_PUSH_ADDR="+ln.Addr().String(),
			"SMQD_PUSH_CYCLE="+strconv.Itoa(c), "SMQD_PUSH_PUBLISH="+strconv.FormatBool(publish))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(runFor, func() { cmd.Process.Signal(syscall.SIGKILL) })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			switch f[0] {
			case "T":
				tried[f[1]] = true
			case "P":
				acked[f[1]] = true
			case "Q":
				queued[f[1]]++
			}
		}
		err = cmd.Wait()
		timer.Stop()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); publish && (!ok || !ws.Signaled()) {
			t.Fatalf("cycle %d: the child ended before it was killed: %v\n%s", c, err, stderr.String())
		}
		if !publish && stderr.Len() > 0 {
			t.Logf("final child stderr:\n%s", stderr.String())
		}
	}
	for c := range cycles {
		run(c, true, time.Duration(300+killAt.IntN(500))*time.Millisecond)
	}
	if len(acked) == 0 {
		t.Fatal("no publish was acknowledged")
	}
	// The final child pushes what is left: retries are due within 8 s
	// (1, 2, 4 s), interrupted pushes after the child's 3 s lease.
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for body := range acked {
			if pushed[body] == 0 {
				out = append(out, body)
			}
		}
		return out
	}
	run(cycles, false, pushFinalWait+30*time.Second)
	if m := missing(); len(m) > 0 {
		t.Fatalf("%d of %d acknowledged publishes were never pushed, e.g. %v", len(m), len(acked), m[:min(5, len(m))])
	}
	for body := range acked {
		if queued[body] != 1 {
			t.Fatalf("acknowledged publish %q is %d times in the queue subscription", body, queued[body])
		}
	}
	for body, n := range queued {
		if !tried[body] || n != 1 {
			t.Fatalf("queue subscription holds %q %d times; published: %v", body, n, tried[body])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for body, n := range pushed {
		if !tried[body] {
			t.Fatalf("pushed %q, which was never published", body)
		}
		dups += n - 1
	}
	t.Logf("%d cycles: %d publishes acknowledged, %d pushed (%d more than once: %d duplicate pushes)", cycles, len(acked), len(pushed), dups, dups)
}

func TestPushKillChild(t *testing.T) {
	dir := os.Getenv(pushChildEnv)
	if dir == "" {
		t.Skip("only run as the child of TestPushKill9")
	}
	cycle := os.Getenv("SMQD_PUSH_CYCLE")
	publish := os.Getenv("SMQD_PUSH_PUBLISH") == "true"
	o := Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	o.WAL.SegmentBytes = 256 << 10
	// A push that times out counts as a failed attempt and doubles its
	// notification's next retry delay, like a refusal. The timeout is long
	// enough that a loaded CI machine does not add such failures to the
	// receiver's two refusals (with 1 s, a CI run once timed out the
	// final child: its backlog did not drain within 60 s).
	o.Push = PushOptions{Timeout: 3 * time.Second, Lease: 6 * time.Second, Concurrency: 4}
	b, err := Open(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		fmt.Fprintln(os.Stderr, "create topic:", err)
		os.Exit(2)
	}
	ep := "http://" + os.Getenv("SMQD_PUSH_ADDR") + "/"
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: ep, Strategy: ExponentialDecayRetry, Format: FormatSimplified}); err != nil {
		fmt.Fprintln(os.Stderr, "subscribe:", err)
		os.Exit(2)
	}
	if _, err := b.CreateQueue("sink", DefaultQueueConfig()); err != nil && !errors.Is(err, ErrQueueAlreadyExist) {
		fmt.Fprintln(os.Stderr, "create queue:", err)
		os.Exit(2)
	}
	if _, err := b.Subscribe("t", "q", SubscriptionConfig{Endpoint: "acs:mns:r:1:queues/sink", Format: FormatSimplified}); err != nil {
		fmt.Fprintln(os.Stderr, "subscribe queue:", err)
		os.Exit(2)
	}
	if !publish {
		// Push until the backlog is gone (the parent's deadline bounds it),
		// then list the queue subscription.
		deadline := time.Now().Add(pushFinalWait)
		for b.PushStats().Backlog > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if b.PushStats().Backlog > 0 {
			// Say what is stuck, for the parent's report.
			now := b.nowMs()
			tp, _ := b.topicByName("t")
			if s, err := b.subByName(tp, "s"); err == nil && b.internalQueue(pushQueueName(s.id)) != nil {
				pq := b.internalQueue(pushQueueName(s.id))
				_ = dumpQueue(pq, func(id MessageID, body []byte, state string, dq uint32, visibleMs int64) {
					env, err := decodePushEnvelope(body)
					fmt.Fprintf(os.Stderr, "left in %s: %s %q %s, received %d times, visible in %d ms (decode: %v)\n",
						pq.name, id, env.body, state, dq, visibleMs-now, err)
				})
			}
		}
		q, _ := b.Queue("sink")
		if err := dumpQueue(q, func(_ MessageID, body []byte, _ string, _ uint32, _ int64) {
			fmt.Fprintf(os.Stdout, "Q %s\n", body)
		}); err != nil {
			fmt.Fprintln(os.Stderr, "dump:", err)
			os.Exit(4)
		}
		b.Close()
		os.Exit(0)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				body := fmt.Sprintf("c%s-w%d-%d", cycle, w, i)
				mu.Lock()
				fmt.Fprintf(os.Stdout, "T %s\n", body)
				mu.Unlock()
				if _, err := b.Publish("t", PublishInput{Body: []byte(body)}); err != nil {
					fmt.Fprintln(os.Stderr, "publish:", err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "P %s\n", body)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
