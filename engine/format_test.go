package engine

// Golden tests of the engine's on-disk formats (record.go, queue_record.go,
// replica_record.go): every record type as the code writes it, the 64-byte
// message snapshot, the queue value and a replicated entry's data, compared
// byte for byte with files checked in under
// testdata/golden. A change to any of them breaks every existing data
// directory, so these files never change; a new format is a new record type.
// Run with -update-golden only to add a file for a new type.

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update-golden", false, "write missing golden files of format_test.go")

// goldenSlot is a message with every field set to a distinct value.
func goldenSlot() slot {
	var s slot
	s.seq = 7<<bootShift | 0x0102
	s.setMeta(1_764_590_400_123, 3, stInactive) // 2025-12-01T12:00:00.123Z
	s.visOff, s.firstOff, s.expOff = 30_000, 1_500, 345_600_000
	s.dequeues, s.gen = 2, 5
	s.bodyPos, s.recSize = 0x0a0b0c0d, 1_108
	return s
}

// goldenRecord is one encoded record: its type and payload as appended.
type goldenRecord struct {
	name string
	typ  uint8
	data []byte
}

func goldenRecords(t *testing.T) []goldenRecord {
	const qid, stripeIdx, slotIdx = 0x11, 2, 0x3344
	s := goldenSlot()
	body := []byte("golden body")
	sum := md5.Sum(body)
	rec := func(name string, r logRec) goldenRecord {
		return goldenRecord{name, r.typ, append(append([]byte(nil), r.head...), r.body...)}
	}
	var out []goldenRecord

	cfg := QueueConfig{Delay: 3 * time.Second, MaxMessageBytes: 4096, Retention: 2 * 24 * time.Hour,
		VisibilityTimeout: 45 * time.Second, PollingWait: 7 * time.Second, LoggingEnabled: true}
	v := queueVal{id: qid, stripes: 4, createMs: 1_764_590_000_000, modifyMs: 1_764_590_400_000, cfg: cfg, name: "golden-queue"}
	out = append(out, goldenRecord{"queue-value", 0, v.encode()})
	vd := v
	vd.cfg.DeadLetterQueue, vd.cfg.MaxReceiveCount = "golden-dlq", 9
	out = append(out, goldenRecord{"queue-value-dlq", 0, vd.encode()})
	out = append(out, goldenRecord{"rec1-queue-create", recQueueCreate, v.encode()})
	out = append(out, goldenRecord{"rec2-queue-config", recQueueConfig, v.encode()})
	var del [8]byte
	binary.LittleEndian.PutUint64(del[:], qid)
	out = append(out, goldenRecord{"rec3-queue-delete", recQueueDelete, del[:]})

	snap := make([]byte, snapLen)
	putSnap(snap, qid, stripeIdx, slotIdx, &s)
	out = append(out, goldenRecord{"snapshot", 0, snap})

	var d durableStore
	var r logRec
	var head [bodyHeadLen]byte
	d.bodyRecord(&r, &head, qid, stripeIdx, slotIdx, &s, &sum, nil, body, false)
	out = append(out, rec("rec4-send", r))
	d.bodyRecord(&r, &head, qid, stripeIdx, slotIdx, &s, &sum, nil, body, true)
	out = append(out, rec("rec8-relocate", r))
	props := goldenProps()
	d.bodyRecord(&r, &head, qid, stripeIdx, slotIdx, &s, &sum, props, body, false)
	out = append(out, rec("rec20-send-props", r))
	d.bodyRecord(&r, &head, qid, stripeIdx, slotIdx, &s, &sum, props, body, true)
	out = append(out, rec("rec21-relocate-props", r))
	src := goldenSlot()
	src.seq++
	srcSnap := make([]byte, snapLen)
	putSnap(srcSnap, qid+1, 1, 0x55, &src)
	d.moveRecord(&r, srcSnap, qid, stripeIdx, slotIdx, &s, &sum, props, body)
	out = append(out, rec("rec23-dead-letter", r))

	// State, delete and expire records as a stripe logs them.
	q := &Queue{id: qid, stripes: make([]stripe, stripeIdx+1)}
	st := &q.stripes[stripeIdx]
	st.q, st.idx, st.slab = q, stripeIdx, newSlab()
	if !st.slab.claim(slotIdx) {
		t.Fatal("claim")
	}
	*st.slab.at(slotIdx) = s
	for _, c := range []struct {
		name string
		typ  uint8
	}{{"rec5-state", recState}, {"rec6-delete", recDelete}, {"rec7-expire", recExpire}} {
		d.changeRecord(st, c.typ, slotIdx)
		out = append(out, rec(c.name, st.recs[len(st.recs)-1]))
	}

	var m memStore
	m.bodyRecord(&r, &head, qid, stripeIdx, slotIdx, &s, &sum, nil, body, false)
	out = append(out, rec("rec9-body", r))
	m.bodyRecord(&r, &head, qid, stripeIdx, slotIdx, &s, &sum, props, body, false)
	out = append(out, rec("rec22-body-props", r))

	// Replica records (replica_record.go). An entry without records is
	// written with first and records end zero (PersistEntries), so those
	// two and the hard and conf state records are what a broker writes for
	// the same values (TestFormatsReplicaWritten).
	for _, e := range goldenEntries {
		out = append(out, goldenRecord{e.name, recEntry, putEntryHeader(e.index, e.term, e.id, e.first, e.recEnd, e.kind, e.data)})
	}
	out = append(out, goldenRecord{"rec11-hard-state", recHardState, putHardState(goldenHardState)})
	out = append(out, goldenRecord{"rec12-conf-state", recConfState, putConfState(goldenConfIdx, []byte(goldenConf))})

	// The data of a records entry as a leader proposes it (replStore.append):
	// a proposal id, then a send and a state record.
	var send, state goldenRecord
	for _, g := range out {
		switch g.typ {
		case recSend:
			send = g
		case recState:
			state = g
		}
	}
	data := binary.LittleEndian.AppendUint64(nil, goldenPropID)
	data = encodeRecords(data, []logRec{{typ: send.typ, head: send.data[:snapLen], body: send.data[snapLen:]}, {typ: state.typ, head: state.data}})
	out = append(out, goldenRecord{"entry-data", 0, data})
	return out
}

// Values of the golden replica records.
const (
	goldenPropID  = 3<<bootShift | 4
	goldenConfIdx = 10
	goldenConf    = "golden conf state"
)

var goldenHardState = ReplicaHardState{Term: 4, Vote: 2, Commit: 10}

var goldenEntries = []struct {
	name                           string
	index, term, id, first, recEnd uint64
	kind                           EntryKind
	data                           []byte
}{
	{name: "rec10-entry-records", index: 9, term: 3, id: goldenPropID, first: 0x1000, recEnd: 0x1800, kind: EntryRecords},
	{name: "rec10-entry-conf-change", index: 10, term: 3, kind: EntryConfChange, data: []byte("golden conf change")},
	{name: "rec10-entry-empty", index: 11, term: 4, kind: EntryEmpty},
}

// goldenProps is a properties block with a user and a system property.
func goldenProps() []byte {
	return appendProps(nil, []Property{
		{Name: []byte("k"), Value: []byte("v1"), Type: PropNumber},
		{Name: []byte("traceparent"), Value: []byte("00-ab-cd-01"), Type: PropString, System: true},
	})
}

// checkGoldenProps checks a decoded goldenProps block.
func checkGoldenProps(t *testing.T, name string, block []byte) {
	t.Helper()
	ps, err := decodeProps(block, nil)
	if err != nil || len(ps) != 2 || string(ps[0].Name) != "k" || string(ps[0].Value) != "v1" || ps[0].Type != PropNumber || ps[0].System ||
		string(ps[1].Name) != "traceparent" || string(ps[1].Value) != "00-ab-cd-01" || ps[1].Type != PropString || !ps[1].System {
		t.Errorf("%s: properties %+v %v", name, ps, err)
	}
}

func TestFormatsGolden(t *testing.T) {
	for _, g := range goldenRecords(t) {
		t.Run(g.name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", g.name+".hex")
			got := hex.Dump(append([]byte{g.typ}, g.data...))
			want, err := os.ReadFile(path)
			if os.IsNotExist(err) && *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Fatalf("%s changed (an on-disk format; never change it):\ngot:\n%swant:\n%s", g.name, got, want)
			}
		})
	}
}

// TestFormatsDecode checks that what the golden records hold decodes to the
// fields that were encoded, as recovery and the checkpointer read them.
func TestFormatsDecode(t *testing.T) {
	s := goldenSlot()
	for _, g := range goldenRecords(t) {
		switch {
		case strings.HasPrefix(g.name, "queue-value"), g.typ == recQueueCreate, g.typ == recQueueConfig:
			v, err := decodeQueueVal(g.data)
			if err != nil || v.id != 0x11 || v.stripes != 4 || v.name != "golden-queue" || v.cfg.PollingWait != 7*time.Second ||
				!v.cfg.LoggingEnabled || v.cfg.Retention != 48*time.Hour || v.modifyMs != 1_764_590_400_000 {
				t.Errorf("%s: %+v %v", g.name, v, err)
			}
			if dlq := g.name == "queue-value-dlq"; dlq != (v.cfg.DeadLetterQueue == "golden-dlq" && v.cfg.MaxReceiveCount == 9) ||
				!dlq && (v.cfg.DeadLetterQueue != "" || v.cfg.MaxReceiveCount != 0) {
				t.Errorf("%s: dead-letter policy %q %d", g.name, v.cfg.DeadLetterQueue, v.cfg.MaxReceiveCount)
			}
		case g.typ == recEntry:
			e, ok := parseEntryHeader(g.data)
			var want entryInfo
			for _, w := range goldenEntries {
				if w.name == g.name {
					want = entryInfo{index: w.index, term: w.term, id: w.id, first: w.first, recEnd: w.recEnd, kind: w.kind, data: w.data}
				}
			}
			if !ok || e.index != want.index || e.term != want.term || e.id != want.id || e.first != want.first ||
				e.recEnd != want.recEnd || e.kind != want.kind || !bytes.Equal(e.data, want.data) || len(g.data) != entryHeaderLen+len(want.data) {
				t.Errorf("%s: %+v %v, want %+v", g.name, e, ok, want)
			}
		case g.typ == recHardState:
			if hs, ok := parseHardState(g.data); !ok || hs != goldenHardState || len(g.data) != hardStateLen {
				t.Errorf("%s: %+v %v", g.name, hs, ok)
			}
		case g.typ == recConfState:
			if idx, cs, ok := parseConfState(g.data); !ok || idx != goldenConfIdx || string(cs) != goldenConf {
				t.Errorf("%s: %d %q %v", g.name, idx, cs, ok)
			}
		case g.name == "entry-data":
			var typs []uint8
			err := decodeRecords(g.data[8:], func(typ uint8, payload []byte) error {
				typs = append(typs, typ)
				if typ == recSend {
					if sum, props, body, err := bodyOf(typ, payload); err != nil || props != nil || string(body) != "golden body" || sum != md5.Sum(body) {
						t.Errorf("%s: send body %q %v", g.name, body, err)
					}
				}
				if m, err := decodeSnap(payload); err != nil || m.qid != 0x11 || m.seq != s.seq {
					t.Errorf("%s: record %d snapshot %+v %v", g.name, typ, m, err)
				}
				return nil
			})
			if binary.LittleEndian.Uint64(g.data) != goldenPropID || err != nil || len(typs) != 2 || typs[0] != recSend || typs[1] != recState {
				t.Errorf("%s: id %x records %v %v", g.name, g.data[:8], typs, err)
			}
		case g.typ == recQueueDelete:
			if binary.LittleEndian.Uint64(g.data) != 0x11 {
				t.Errorf("%s: %x", g.name, g.data)
			}
		case g.typ == recBody || g.typ == recBodyProps || g.typ == recDeadLetter:
			qid, stripeIdx, slotIdx, ok := ownerOf(g.typ, g.data)
			sum, props, body, err := bodyOf(g.typ, g.data)
			if !ok || qid != 0x11 || stripeIdx != 2 || slotIdx != 0x3344 || err != nil || string(body) != "golden body" || sum != md5.Sum(body) {
				t.Errorf("%s: owner %d/%d/%d %v body %q %v", g.name, qid, stripeIdx, slotIdx, ok, body, err)
			}
			if g.typ == recBody {
				if props != nil {
					t.Errorf("%s: properties %x", g.name, props)
				}
			} else {
				checkGoldenProps(t, g.name, props)
			}
			if g.typ == recDeadLetter {
				src, err := decodeSnap(g.data)
				target, err2 := decodeSnap(g.data[snapLen:])
				if err != nil || err2 != nil || src.qid != 0x12 || src.seq != s.seq+1 || src.slot != 0x55 || target.qid != 0x11 || target.seq != s.seq {
					t.Errorf("%s: source %+v target %+v %v %v", g.name, src, target, err, err2)
				}
			}
		default: // a snapshot, alone or leading a message record
			m, err := decodeSnap(g.data)
			want := msgSnap{qid: 0x11, seq: s.seq, enqMs: s.enqueueMs(), visOff: s.visOff, firstOff: s.firstOff, expOff: s.expOff,
				dequeues: s.dequeues, gen: s.gen, slot: 0x3344, stripe: 2, prio: 3, bodyPos: s.bodyPos, recSize: s.recSize}
			if err != nil || m != want || g.data[50] != stInactive {
				t.Errorf("%s: %+v %v, want %+v", g.name, m, err, want)
			}
			if isSendRec(g.typ) || isRelocateRec(g.typ) {
				qid, stripeIdx, slotIdx, ok := ownerOf(g.typ, g.data)
				sum, props, body, err := bodyOf(g.typ, g.data)
				if !ok || qid != 0x11 || stripeIdx != 2 || slotIdx != 0x3344 || err != nil || string(body) != "golden body" || sum != md5.Sum(body) {
					t.Errorf("%s: owner %d/%d/%d body %q %v", g.name, qid, stripeIdx, slotIdx, body, err)
				}
				if hasProps(g.typ) {
					checkGoldenProps(t, g.name, props)
				} else if props != nil {
					t.Errorf("%s: properties %x", g.name, props)
				}
			}
		}
	}
}
