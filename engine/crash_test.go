package engine

// Kill -9 crash test.
//
// The parent re-executes this test binary as a child that opens a durable
// broker and runs mixed load (sends with delays and all 16 priorities,
// receives, deletes, visibility changes) while printing, line by line and
// unbuffered, what it did and what was acknowledged. The parent kills it with
// SIGKILL at a random moment, starts it again on the same directory and
// checks the state the new child recovered (which it prints before doing
// anything else) against the whole history:
//
//   - no acknowledged send is lost;
//   - no message whose delete was acknowledged comes back;
//   - no acknowledged visibility change is undone: until its new
//     NextVisibleTime the message stays Inactive, and not visible earlier;
//   - no message that was never sent appears;
//   - no DequeueCount goes below one that was fsynced, or below the one a
//     receive reported before an acknowledged visibility change of the
//     message (its record carries the count);
//   - MessageIds are unique.
//
// TestCrashKill9 runs the child with sync "always" (acknowledged after the
// fsync); crash_sync_test.go runs it with "interval" (an hour: the timer
// never fsyncs) and "none", where an operation is acknowledged once its
// records are written to the OS, which a kill -9 of the process does not
// undo, and in some cycles with every log write slowed (wal.NewSlowWriteFS), so
// that records wait in the log's ring long enough for an acknowledgement
// that did not wait for the write to be seen lost.
//
// Child protocol (stdout, one line per event):
//
//	M <id> <tag> <state> <dequeues> <visible ms> <now ms>
//	                                  a message found at start-up, and the
//	                                  child's clock just after its state
//	                                  was read (an Active message's
//	                                  visibility had ended by then)
//	READY                             the dump is complete
//	T <tag>                           about to send a message with body <tag>
//	S <tag> <id>                      the send was acknowledged
//	R <id> <dequeues>                 received
//	V <id> <visible ms>               a visibility change was acknowledged
//	                                  (durable in sync mode always)
//	d <id>                            about to delete (the delete may land
//	                                  in the log even if the child dies before "D")
//	D <id>                            deleted (durable in sync mode always)
//	B <k> / E <k>                     a Broker.Sync started / returned; every
//	                                  line before "B k" is durable once "E k" is printed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

const crashChildEnv = "SMQD_CRASH_CHILD_DIR"

func TestCrashKill9(t *testing.T) {
	cycles := 20
	if modelLong {
		cycles = 200
	}
	runCrashKill9(t, "always", cycles, 0)
}

// runCrashKill9 runs cycles children with the sync mode ("always",
// "interval" or "none"), each killed with SIGKILL at a random moment, and
// checks every start against the history. With writeDelay > 0, every
// other cycle's child (the odd ones) sleeps that long before each write to
// its log files (wal.NewSlowWriteFS). SMQD_CRASH_SEED, if set, replaces the
// random seed, and SMQD_CRASH_WRITE_DELAY (a duration) writeDelay.
func runCrashKill9(t *testing.T, mode string, cycles int, writeDelay time.Duration) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("child process")
	}
	dir := t.TempDir()
	if keep := os.Getenv("SMQD_CRASH_KEEP"); keep != "" {
		dir = keep // keep the data directory for a post-mortem
	}
	h := newCrashHistory()
	h.mode = mode
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	seed := rnd.Uint64()
	if s := os.Getenv("SMQD_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
		rnd = rand.New(rand.NewPCG(seed, 42))
	}
	if d := os.Getenv("SMQD_CRASH_WRITE_DELAY"); d != "" {
		var err error
		if writeDelay, err = time.ParseDuration(d); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("crash test sync %s, seed %d, %d cycles, write delay %v, dir %s", mode, seed, cycles, writeDelay, dir)
	for c := 0; c < cycles; c++ {
		runFor := time.Duration(50+rnd.IntN(400)) * time.Millisecond
		h.writeDelay = 0
		if c%2 == 1 {
			h.writeDelay = writeDelay
		}
		h.runChild(t, dir, seed+uint64(c), runFor, c)
	}
	// A final clean start must pass the same checks.
	h.writeDelay = 0
	h.runChild(t, dir, seed+uint64(cycles), 0, cycles)
	t.Logf("history: %d sends acknowledged, %d deletes (%d acknowledged), %d receives, %d visibility changes acknowledged",
		len(h.acked), len(h.deleted), len(h.deletedDurable), h.receives, h.visChanges)
}

type crashHistory struct {
	lines []string // every line of every child but its start-up dump, for failure reports
	// dump and prevDump: the start-up dumps of this cycle and the one
	// before (for failure reports too). Every dump kept made the parent
	// hold quadratic memory: 200 cycles of a growing backlog took 23 GB
	// and the machine with it (2026-12-06).
	dump, prevDump []string
	attempted      map[string]bool
	acked          map[string]string // tag -> id
	ackedIDs       map[string]string // id -> tag
	deleted        map[string]bool   // ids a delete was tried on
	deletedDurable map[string]bool   // ids whose delete was acknowledged
	visAcked       map[string]int64  // id -> NextVisibleTime of its last acknowledged visibility change
	dqDurable      map[string]int
	lastDq         map[string]int // id -> DequeueCount of its last receive
	receives       int
	visChanges     int

	mode       string        // the children's sync mode
	writeDelay time.Duration // the next child's wal.NewSlowWriteFS delay (0: none)
}

func newCrashHistory() *crashHistory {
	return &crashHistory{attempted: map[string]bool{}, acked: map[string]string{}, ackedIDs: map[string]string{},
		deleted: map[string]bool{}, deletedDurable: map[string]bool{}, dqDurable: map[string]int{}, lastDq: map[string]int{}, visAcked: map[string]int64{}}
}

func (h *crashHistory) runChild(t *testing.T, dir string, seed uint64, runFor time.Duration, cycle int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "SMQD_CRASH_SEED="+strconv.FormatUint(seed, 10),
		"SMQD_CRASH_SYNC="+h.mode, "SMQD_CRASH_WRITE_DELAY="+h.writeDelay.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	defer func() {
		h.lines = append(h.lines, fmt.Sprintf("c%d stderr: %s", cycle, strings.ReplaceAll(stderr.String(), "\n", "\n    ")))
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// The start-up dump.
	present := map[string]bool{}
	ready := false
	h.prevDump, h.dump = h.dump, nil
	for sc.Scan() {
		h.dump = append(h.dump, fmt.Sprintf("c%d %s", cycle, sc.Text()))
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "READY" {
			ready = true
			break
		}
		if len(f) != 7 || f[0] != "M" {
			continue
		}
		id, tag, state := f[1], f[2], f[3]
		dq, _ := strconv.Atoi(f[4])
		visible, _ := strconv.ParseInt(f[5], 10, 64)
		now, _ := strconv.ParseInt(f[6], 10, 64)
		if v, ok := h.visAcked[id]; ok && (state == "Active" && now < v || state == "Inactive" && visible < v) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("cycle %d (sync %s): message %s is %s with NextVisibleTime %d at %d, but a visibility change to %d was acknowledged; history:\n%s",
				cycle, h.mode, id, state, visible, now, v, h.grep(id))
		}
		if present[id] {
			t.Fatalf("cycle %d: message id %s twice after restart", cycle, id)
		}
		present[id] = true
		if !h.attempted[tag] {
			t.Fatalf("cycle %d: message %s with body %q that was never sent", cycle, id, tag)
		}
		if h.deletedDurable[id] {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("cycle %d (sync %s): message %s came back after its delete was acknowledged; history:\n%s\nstderr:\n%s", cycle, h.mode, id, h.grep(id, tag, " B ", "c%d B"), stderr.String())
		}
		if want := h.dqDurable[id]; dq < want {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("cycle %d (sync %s): message %s DequeueCount %d < %d (fsynced, or carried by an acknowledged visibility change); history:\n%s", cycle, h.mode, id, dq, want, h.grep(id))
		}
		if known, ok := h.acked[tag]; ok && known != id {
			t.Fatalf("cycle %d: body %q has id %s, acknowledged as %s", cycle, tag, id, known)
		}
		if known, ok := h.ackedIDs[id]; ok && known != tag {
			t.Fatalf("cycle %d: message %s has body %q, acknowledged with body %q", cycle, id, tag, known)
		}
		h.dqDurable[id] = max(h.dqDurable[id], dq)
	}
	if !ready {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("cycle %d: child died before READY: %s", cycle, stderr.String())
	}
	for tag, id := range h.acked {
		if !present[id] && !h.deleted[id] {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("cycle %d (sync %s): acknowledged message %s (%s) lost; its history:\n%s\nchild stderr:\n%s", cycle, h.mode, id, tag, h.grep(id, tag, "stderr"), stderr.String())
		}
	}
	// Forget deletes that turned out not to have happened: the message is
	// back and may be deleted again later.
	for id := range h.deleted {
		if present[id] {
			delete(h.deleted, id)
		}
	}
	if runFor == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		return
	}
	timer := time.AfterFunc(runFor, func() { cmd.Process.Signal(syscall.SIGKILL) })
	defer timer.Stop()
	var pending []string // lines since the last "B k"
	began := map[string][]string{}
	var lastPending []string
	for sc.Scan() {
		line := sc.Text()
		h.lines = append(h.lines, fmt.Sprintf("c%d %s", cycle, line))
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "T":
			h.attempted[f[1]] = true
		case "S":
			h.acked[f[1]] = f[2]
			h.ackedIDs[f[2]] = f[1]
		case "R":
			h.receives++
			delete(h.visAcked, f[1]) // received again: visible again, as it may be
			h.lastDq[f[1]], _ = strconv.Atoi(f[2])
		case "d":
			h.deleted[f[1]] = true
		case "D":
			h.deleted[f[1]] = true
			h.deletedDurable[f[1]] = true
			delete(h.visAcked, f[1])
		case "V":
			v, _ := strconv.ParseInt(f[2], 10, 64)
			h.visAcked[f[1]] = v
			h.visChanges++
			// The change's record holds the message's DequeueCount, at
			// least the one its receive (printed before) reported; it
			// is in the log once acknowledged, after that receive's.
			h.dqDurable[f[1]] = max(h.dqDurable[f[1]], h.lastDq[f[1]])
		case "B":
			lastPending = append(lastPending, pending...)
			began[f[1]] = lastPending
			lastPending = nil
			pending = nil
			continue
		case "E":
			for _, l := range began[f[1]] {
				h.makeDurable(l)
			}
			delete(began, f[1])
			continue
		}
		pending = append(pending, line)
	}
	cmd.Wait()
}

// grep returns the history lines that mention any of the words.
func (h *crashHistory) grep(words ...string) string {
	var out []string
	for _, l := range slices.Concat(h.lines, h.prevDump, h.dump) {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// makeDurable records the effect of a line known to be fsynced.
func (h *crashHistory) makeDurable(line string) {
	f := strings.Fields(line)
	switch f[0] {
	case "R":
		dq, _ := strconv.Atoi(f[2])
		h.dqDurable[f[1]] = max(h.dqDurable[f[1]], dq)
	}
}

// TestCrashChild is the child process of TestCrashKill9.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only run as the child of TestCrashKill9")
	}
	seed, _ := strconv.ParseUint(os.Getenv("SMQD_CRASH_SEED"), 10, 64)
	o := Options{Dir: dir, Stripes: 3, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	syncEvery := 5 // ms between the Broker.Syncs below, plus up to 30
	switch mode := os.Getenv("SMQD_CRASH_SYNC"); mode {
	case "", "always":
	case "interval":
		o.WAL.Sync, o.WAL.SyncInterval = SyncInterval, time.Hour // the timer never fsyncs
		syncEvery = 50
	case "none":
		o.WAL.Sync = SyncNone
		syncEvery = 50
	default:
		fmt.Fprintln(os.Stderr, "unknown SMQD_CRASH_SYNC", mode)
		os.Exit(2)
	}
	if d, _ := time.ParseDuration(os.Getenv("SMQD_CRASH_WRITE_DELAY")); d > 0 {
		o.WAL.FS = wal.NewSlowWriteFS(wal.OSFS(), d)
	}
	o.WAL.SegmentBytes = 256 << 10
	o.WAL.BufferBytes = 4 << 20
	o.CheckpointBytes = 512 << 10
	b, err := Open(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	emit := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
		mu.Unlock()
	}
	// Dump the recovered state.
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = 2 * time.Second
	cfg.Retention = MaxRetention
	if _, err := b.CreateQueue("crash", cfg); err != nil && !errors.Is(err, ErrQueueAlreadyExist) {
		fmt.Fprintln(os.Stderr, "create:", err)
		os.Exit(2)
	}
	q, _ := b.Queue("crash")
	fmt.Fprintf(os.Stderr, "recovered: %+v wal %+v\n", b.Recovery(), durableOf(b).wal.Recovery())
	if err := dumpQueue(q, func(id MessageID, body []byte, state string, dq uint32, visible int64) {
		emit("M %s %s %s %d %d %d", id, body, state, dq, visible, b.nowMs())
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	emit("READY")

	rnd := rand.New(rand.NewPCG(seed, 7))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for p := 0; p < 2; p++ {
		wg.Add(1)
		prnd := rand.New(rand.NewPCG(seed, uint64(p)+100))
		go func(p int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := 1 + prnd.IntN(MaxBatch)
				entries := make([]SendEntry, k)
				for i := range entries {
					tag := fmt.Sprintf("s%d-p%d-%d-%d", seed, p, n, i)
					entries[i] = SendEntry{Body: []byte(tag), Priority: 1 + prnd.IntN(16)}
					if prnd.IntN(4) == 0 {
						entries[i].Delay, entries[i].HasDelay = time.Duration(prnd.IntN(3000))*time.Millisecond, true
					}
					emit("T %s", tag)
				}
				res, err := q.Send(entries, nil)
				if err != nil {
					fmt.Fprintln(os.Stderr, "send:", err)
					os.Exit(3)
				}
				for i := range res {
					emit("S %s %s", entries[i].Body, res[i].ID)
				}
				// 2 ms between batches bounds what 200 cycles
				// send: unthrottled, the history the parent keeps (and
				// each start's dump) grew past the machine's memory.
				time.Sleep(2 * time.Millisecond)
			}
		}(p)
	}
	for c := 0; c < 2; c++ {
		wg.Add(1)
		crnd := rand.New(rand.NewPCG(seed, uint64(c)+200))
		go func() {
			defer wg.Done()
			errs := make([]error, MaxBatch)
			for {
				select {
				case <-stop:
					return
				default:
				}
				msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: 1 + crnd.IntN(MaxBatch), Wait: 100 * time.Millisecond, HasWait: true}, nil)
				if errors.Is(err, ErrMessageNotExist) {
					continue
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "receive:", err)
					os.Exit(3)
				}
				var hs []ReceiptHandle
				var ids []MessageID
				for _, m := range msgs {
					emit("R %s %d", m.ID, m.DequeueCount)
					switch r := crnd.IntN(10); {
					case r < 7:
						hs = append(hs, m.Handle)
						ids = append(ids, m.ID)
					case r < 8:
						if _, next, err := q.ChangeVisibility(m.Handle, 30*time.Second); err == nil {
							emit("V %s %d", m.ID, next.UnixMilli())
						}
					}
				}
				if len(hs) == 0 {
					continue
				}
				for _, id := range ids {
					emit("d %s", id)
				}
				if _, err := q.Delete(hs, errs); err != nil {
					fmt.Fprintln(os.Stderr, "delete:", err)
					os.Exit(3)
				}
				for i := range hs {
					if errs[i] == nil {
						emit("D %s", ids[i])
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(syncEvery+rnd.IntN(30)) * time.Millisecond):
			}
			emit("B %d %d", k, durableOf(b).wal.End())
			if err := b.Sync(); err != nil {
				fmt.Fprintln(os.Stderr, "sync:", err)
				os.Exit(3)
			}
			emit("E %d", k)
		}
	}()
	// Run until killed (bounded: a child nobody kills exits after 60 s).
	time.Sleep(60 * time.Second)
	close(stop)
	wg.Wait()
	b.Close()
}

// dumpQueue calls fn for every message of q, in any state, with its body.
// A body that cannot be read ends it with the error.
func dumpQueue(q *Queue, fn func(id MessageID, body []byte, state string, dq uint32, visibleMs int64)) error {
	return dumpQueueMsgs(q, func(id MessageID, m *Message, state string, dq uint32, visibleMs int64) {
		fn(id, m.Body, state, dq, visibleMs)
	})
}

// dumpQueueMsgs is dumpQueue with the whole message (body and properties).
func dumpQueueMsgs(q *Queue, fn func(id MessageID, m *Message, state string, dq uint32, visibleMs int64)) error {
	for si := range q.stripes {
		st := &q.stripes[si]
		st.mu.Lock()
		type item struct {
			loc     bodyLoc
			state   string
			dq      uint32
			visible int64
		}
		var items []item
		for i := uint32(0); i < st.slab.n; i++ {
			if !st.slab.valid(i) {
				continue
			}
			s := st.slab.at(i)
			if s.seq == 0 || s.state() == stPending {
				continue
			}
			name := map[uint8]string{stDelayed: "Delayed", stActive: "Active", stInactive: "Inactive"}[s.state()]
			items = append(items, item{bodyLoc{pos: s.bodyPos, size: s.recSize, slot: i, seq: s.seq, stripe: st.idx}, name, s.dequeues, s.visibleMs()})
		}
		st.mu.Unlock()
		for _, it := range items {
			var m Message
			if ok, err := q.readBody(q.b.getReader(), &m, &it.loc); err != nil || !ok {
				return fmt.Errorf("dump: message %s: read body: %v", makeMessageID(q.id, it.loc.seq), err)
			}
			fn(makeMessageID(q.id, it.loc.seq), &m, it.state, it.dq, it.visible)
		}
	}
	return nil
}
