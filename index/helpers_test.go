package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// tHandler is a slog.Handler that writes to t.Log, so that a test's log
// shows next to its failure.
type tHandler struct {
	mu    *sync.Mutex
	t     testing.TB
	attrs []slog.Attr
}

// Enabled drops Debug (Badger's Info), which is a page per flush.
func (h tHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h tHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.t.Log(b.String())
	return nil
}

func (h tHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h tHandler) WithGroup(string) slog.Handler { return h }

// testLogger returns a logger that writes to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(tHandler{mu: new(sync.Mutex), t: t})
}

// testOptions returns options for tests: logging to t, small memtables so
// that tests reach flushes quickly.
func testOptions(t testing.TB) Options {
	return Options{Logger: testLogger(t), MemTableBytes: 4 << 20}
}

// openT opens dir or fails the test; the store is closed at cleanup if
// the test did not close it.
func openT(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// msgVal is the deterministic value of message (q, seq) in generation gen.
func msgVal(q, seq uint64, gen byte) []byte {
	v := make([]byte, 0, 60)
	v = append(v, gen, 'v')
	v = binary.BigEndian.AppendUint64(v, q)
	v = binary.BigEndian.AppendUint64(v, seq)
	for len(v) < 60 {
		v = append(v, byte(len(v))^gen)
	}
	return v
}

// state is everything a store holds, as plain maps, for comparisons.
type state struct {
	pos      uint64
	hasPos   bool
	queues   map[uint64]string
	messages map[[2]uint64]string
}

func newState() state {
	return state{queues: map[uint64]string{}, messages: map[[2]uint64]string{}}
}

// readState reads everything from s, checking key order on the way.
func readState(t testing.TB, s *Store) state {
	t.Helper()
	st := newState()
	var err error
	st.pos, st.hasPos, err = s.Position()
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	var last uint64
	first := true
	if err := s.Queues(func(id uint64, v []byte) error {
		if !first && id <= last {
			return fmt.Errorf("queue %d after %d", id, last)
		}
		first, last = false, id
		st.queues[id] = string(v)
		return nil
	}); err != nil {
		t.Fatalf("Queues: %v", err)
	}
	var lastKey []byte
	if err := s.Messages(func(q, seq uint64, v []byte) error {
		k := appendMessageKey(nil, q, seq)
		if lastKey != nil && bytes.Compare(k, lastKey) <= 0 {
			return fmt.Errorf("message %d/%d out of order", q, seq)
		}
		lastKey = k
		st.messages[[2]uint64{q, seq}] = string(v)
		return nil
	}); err != nil {
		t.Fatalf("Messages: %v", err)
	}
	return st
}

// diffState returns a description of the first differences between got and
// want, or "" if they are equal.
func diffState(got, want state) string {
	var d []string
	if got.hasPos != want.hasPos || got.pos != want.pos {
		d = append(d, fmt.Sprintf("position %d/%v, want %d/%v", got.pos, got.hasPos, want.pos, want.hasPos))
	}
	for id, v := range want.queues {
		if g, ok := got.queues[id]; !ok || g != v {
			d = append(d, fmt.Sprintf("queue %d = %q (present %v), want %q", id, g, ok, v))
		}
	}
	for id := range got.queues {
		if _, ok := want.queues[id]; !ok {
			d = append(d, fmt.Sprintf("unexpected queue %d", id))
		}
	}
	var missing, extra, wrong int
	var examples []string
	for k, v := range want.messages {
		g, ok := got.messages[k]
		switch {
		case !ok:
			missing++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("missing %v", k))
			}
		case g != v:
			wrong++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("wrong %v", k))
			}
		}
	}
	for k := range got.messages {
		if _, ok := want.messages[k]; !ok {
			extra++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("extra %v", k))
			}
		}
	}
	if missing+extra+wrong > 0 {
		d = append(d, fmt.Sprintf("messages: %d missing, %d extra, %d wrong (of %d): %v", missing, extra, wrong, len(want.messages), examples))
	}
	return strings.Join(d, "; ")
}

// crashImage copies every file of the open store in src into a new
// directory, as a process crash at this moment would leave them: the
// memory-mapped files are read through the page cache, which is what the
// kernel writes back after the process dies. The caller must make sure no
// write is in flight (no Commit running; compactions may still be, so tests
// that need a quiet directory use NumCompactors 0).
func crashImage(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
	return dst
}

// copyFile copies a file, keeping it sparse where the source reads as zeros
// in whole 64 KiB chunks (memtable WALs are preallocated sparse files).
func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	zero := make([]byte, 64<<10)
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if !bytes.Equal(buf[:n], zero[:n]) {
				if _, werr := out.WriteAt(buf[:n], off); werr != nil {
					t.Fatal(werr)
				}
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Truncate(off); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// filesWithExt lists the files in dir ending in ext, sorted by name.
func filesWithExt(t testing.TB, dir, ext string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ext) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// commitMessages commits one batch putting messages [from, to) of queue q
// in generation gen, and the position pos if pos > 0; it records them in
// want.
func commitMessages(t testing.TB, s *Store, want *state, q, from, to uint64, gen byte, pos uint64) {
	t.Helper()
	b := s.NewBatch()
	for seq := from; seq < to; seq++ {
		v := msgVal(q, seq, gen)
		b.PutMessage(q, seq, v)
		want.messages[[2]uint64{q, seq}] = string(v)
	}
	if pos > 0 {
		b.SetPosition(pos)
		want.pos, want.hasPos = pos, true
	}
	if err := s.Commit(b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}
