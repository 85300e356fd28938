package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFormatsReplicaWritten checks that a replicated broker writes the
// replica records of testdata/golden: it persists the golden values through
// the consensus layer's calls and compares the records its log then holds
// with the checked-in bytes (an entry of records: its header names where
// the entry's records landed, and Entries gives back the data it got).
func TestFormatsReplicaWritten(t *testing.T) {
	o := Options{Dir: t.TempDir(), Replica: &handReplica{kick: make(chan struct{}, 1)}, FreeSpaceReserve: -1, Stripes: 1,
		Clock: NewFakeClock(time.Date(2025, 12, 1, 12, 0, 0, 0, time.UTC)), Logger: testLogger(t)}
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.CloseForRebuild(); err != nil {
			t.Error(err)
		}
	}()
	r, err := b.repl()
	if err != nil {
		t.Fatal(err)
	}
	golden := map[string]goldenRecord{}
	for _, g := range goldenRecords(t) {
		golden[g.name] = g
	}
	// written runs persist and returns the records it appended.
	type rec struct {
		pos, end uint64
		typ      uint8
		payload  []byte
	}
	written := func(persist func() error) []rec {
		t.Helper()
		from := uint64(r.wal.End())
		if err := persist(); err != nil {
			t.Fatal(err)
		}
		var out []rec
		err := r.readRange(from, uint64(r.wal.End()), func(pos uint64, size uint32, typ uint8, payload []byte) {
			out = append(out, rec{pos, pos + uint64(size), typ, append([]byte(nil), payload...)})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(name string, got rec) {
		t.Helper()
		want, err := os.ReadFile(filepath.Join("testdata", "golden", name+".hex"))
		if err != nil {
			t.Fatal(err)
		}
		if g := hex.Dump(append([]byte{got.typ}, got.payload...)); g != string(want) {
			t.Errorf("%s as a broker writes it:\n%swant:\n%s", name, g, want)
		}
	}

	recs := written(func() error { return b.PersistHardState(goldenHardState) })
	if len(recs) != 1 {
		t.Fatalf("hard state: %d records", len(recs))
	}
	same("rec11-hard-state", recs[0])
	recs = written(func() error { return b.PersistConfState(goldenConfIdx, []byte(goldenConf)) })
	if len(recs) != 1 {
		t.Fatalf("conf state: %d records", len(recs))
	}
	same("rec12-conf-state", recs[0])

	// A received entry of records, then the entries without records.
	data := golden["entry-data"].data
	e0 := goldenEntries[0]
	recs = written(func() error {
		return b.PersistEntries([]ReplicaEntry{{Index: e0.index, Term: e0.term, Kind: EntryRecords, Data: data}})
	})
	if len(recs) != 3 || recs[0].typ != recSend || recs[1].typ != recState || recs[2].typ != recEntry {
		t.Fatalf("entry of records: %+v", recs)
	}
	if !bytes.Equal(recs[0].payload, golden["rec4-send"].data) {
		t.Errorf("the send record of a received entry changed:\n%x\nwant\n%x", recs[0].payload, golden["rec4-send"].data)
	}
	if m, err := decodeSnap(recs[1].payload); err != nil || m.bodyPos != recs[0].pos || uint64(m.recSize) != recs[0].end-recs[0].pos {
		t.Errorf("the state record names body %d+%d, want the send record at %d+%d (invariant 4): %v",
			m.bodyPos, m.recSize, recs[0].pos, recs[0].end-recs[0].pos, err)
	}
	want := putEntryHeader(e0.index, e0.term, e0.id, recs[0].pos, recs[1].end, EntryRecords, nil)
	if !bytes.Equal(recs[2].payload, want) {
		t.Errorf("entry header %x, want %x", recs[2].payload, want)
	}
	for _, e := range goldenEntries[1:] {
		recs = written(func() error {
			return b.PersistEntries([]ReplicaEntry{{Index: e.index, Term: e.term, Kind: e.kind, Data: e.data}})
		})
		if len(recs) != 1 {
			t.Fatalf("%s: %d records", e.name, len(recs))
		}
		same(e.name, recs[0])
	}

	// What the consensus layer reads back: the data it persisted, with the
	// state record's body location zeroed (a follower writes its own).
	ents, ok, err := b.Entries(e0.index, e0.index+1, 1<<20)
	if err != nil || !ok || len(ents) != 1 {
		t.Fatalf("Entries: %+v %v %v", ents, ok, err)
	}
	want = append([]byte(nil), data...)
	setSnapBody(want[8+5+len(golden["rec4-send"].data)+5:], 0, 0)
	if binary.LittleEndian.Uint64(ents[0].Data) != goldenPropID || !bytes.Equal(ents[0].Data, want) {
		t.Errorf("Entries data\n%x\nwant\n%x", ents[0].Data, want)
	}
}
