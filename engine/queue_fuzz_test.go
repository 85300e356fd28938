package engine

// FuzzQueueRecords: the decoders of queue values, message snapshots,
// body-carrying records, property blocks and a replica's bookkeeping
// records (queue_record.go, record.go, props.go, replica_record.go) never
// panic on any payload (a record that passed its checksum can still be
// malformed), what they accept re-encodes to the same bytes, and folding
// any queue or message record either works or fails with errBadRecord.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
)

func FuzzQueueRecords(f *testing.F) {
	cfg := DefaultQueueConfig()
	qv := queueVal{id: 3, stripes: 4, createMs: 1, modifyMs: 2, cfg: cfg, name: "q"}
	f.Add(uint8(0), qv.encode())
	cfg.DeadLetterQueue, cfg.MaxReceiveCount, cfg.LoggingEnabled = "dlq", 5, true
	qv.cfg = cfg
	f.Add(uint8(0), qv.encode())
	snap := make([]byte, snapLen)
	putSnap(snap, 3, 1, 7, &slot{seq: 9, gen: 2})
	snap[49] = 8
	f.Add(uint8(1), snap)
	props := appendProps(nil, []Property{{Name: []byte("k"), Value: []byte("v"), Type: PropString},
		{Name: []byte("n"), Value: []byte("12"), Type: PropNumber, System: true}})
	f.Add(uint8(2), props)
	body := append(append(append([]byte(nil), snap...), make([]byte, 16)...), "hello"...)
	f.Add(uint8(3), body)
	f.Add(uint8(4), putPropsHead(append(snap[:snapLen:snapLen], make([]byte, 16)...), snapLen, props))
	f.Add(uint8(5), putEntryHeader(1, 2, 3, 4, 5, EntryConfChange, []byte("conf")))
	f.Add(uint8(6), putHardState(ReplicaHardState{Term: 1, Vote: 2, Commit: 3}))
	f.Add(uint8(7), putConfState(4, []byte("cs")))
	f.Add(uint8(8), binary.LittleEndian.AppendUint64(nil, 3))
	f.Fuzz(func(t *testing.T, kind uint8, in []byte) {
		switch kind % 9 {
		case 0:
			if v, err := decodeQueueVal(in); err == nil && msInRange(in) {
				w, err := decodeQueueVal(v.encode())
				if err != nil || !sameQueueVal(v, w) {
					t.Fatalf("queue value %x decodes as %+v, which re-encodes as %+v (%v)", in, v, w, err)
				}
			}
		case 1:
			if s, err := decodeSnap(in); err == nil {
				b := make([]byte, snapLen)
				copy(b, in)
				if got, err := decodeSnap(b); err != nil || got != s {
					t.Fatalf("snapshot %x decodes as %+v, then %+v (%v)", in, s, got, err)
				}
			}
		case 2:
			if ps, err := decodeProps(in, nil); err == nil {
				if got := appendProps(nil, ps); !bytes.Equal(got, in) {
					t.Fatalf("property block %x re-encodes as %x", in, got)
				}
			}
		case 5:
			if e, ok := parseEntryHeader(in); ok {
				got := putEntryHeader(e.index, e.term, e.id, e.first, e.recEnd, e.kind, e.data)
				if n := entryHeaderLen; !bytes.Equal(got[:n], in[:n]) || (e.kind == EntryConfChange && !bytes.Equal(got, in)) {
					t.Fatalf("entry header %x re-encodes as %x", in, got)
				}
			}
		case 6:
			if hs, ok := parseHardState(in); ok {
				if got := putHardState(hs); !bytes.Equal(got, in[:hardStateLen]) {
					t.Fatalf("hard state %x re-encodes as %x", in, got)
				}
			}
		case 7:
			if idx, cs, ok := parseConfState(in); ok {
				if got := putConfState(idx, cs); !bytes.Equal(got, in) {
					t.Fatalf("conf state %x re-encodes as %x", in, got)
				}
			}
		}
		for _, typ := range []uint8{recBody, recBodyProps, recSend, recSendProps, recRelocate, recRelocateProps, recDeadLetter} {
			ownerOf(typ, in)
			if _, p, b, err := bodyOf(typ, in); err == nil {
				if len(p)+len(b) > len(in) {
					t.Fatalf("bodyOf(%d, %d bytes): properties of %d and body of %d", typ, len(in), len(p), len(b))
				}
				if hasProps(typ) {
					var m Message
					if err := m.setProps(p); err != nil && !errors.Is(err, errBadRecord) {
						t.Fatalf("properties of type %d: %v", typ, err)
					}
				}
			} else if !errors.Is(err, errBadRecord) {
				t.Fatalf("bodyOf(%d): %v", typ, err)
			}
		}
		typ := []uint8{recQueueCreate, recQueueConfig, recQueueDelete, recSend, recState, recDelete,
			recExpire, recRelocate, recSendProps, recRelocateProps, recDeadLetter, recEntry}[int(kind)%12]
		fd := newFold(0)
		if err := fd.apply(0, uint32(len(in)), typ, in); err != nil && !errors.Is(err, errBadRecord) {
			t.Fatalf("fold of type %d: %v", typ, err)
		}
	})
}

// sameQueueVal compares two decoded queue values field by field.
func sameQueueVal(a, b queueVal) bool {
	return a.id == b.id && a.stripes == b.stripes && a.createMs == b.createMs && a.modifyMs == b.modifyMs &&
		a.name == b.name && a.cfg == b.cfg
}

// msInRange reports whether the millisecond fields of an encoded queue
// value fit a time.Duration (any other value is garbage the decoder takes
// as it comes; only a corrupt record holds one).
func msInRange(b []byte) bool {
	for _, off := range []int{26, 38, 46, 54} {
		ms := int64(binary.LittleEndian.Uint64(b[off:]))
		if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return false
		}
	}
	return true
}
