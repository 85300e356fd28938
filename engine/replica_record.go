package engine

// Replica records (replica.go): what a replicated shard's WAL holds besides
// the engine's own records, and the data of a replicated log entry.
//
// Record type numbers and payload layouts are part of the on-disk format;
// never change them (add new types instead). All integers are little endian.
// testdata/golden holds every one as the code writes it (format_test.go).
//
//	type 10 entry      entry header: index u64 | term u64 | proposal id u64 |
//	                   first u64 | records end u64 | kind u8 | conf-change data
//	                   (kind 1 only; nothing after kind otherwise). The entry's
//	                   records are the engine records in [first, records end)
//	                   of the local log; the proposal id is 0 unless kind 0.
//	type 11 hardState  term u64 | vote u64 | commit u64
//	type 12 confState  entry index u64 | the consensus layer's configuration
//	                   bytes (as of that index)
//
// The data of an entry of kind 0 (EntryRecords), as the consensus layer
// sends it to other nodes (never stored as such: Entries rebuilds it from
// the records):
//
//	proposal id u64 | per record: type u8 | payload length u32 | payload
//
// where a state, delete or expire record's body location fields are zero
// (a follower writes its own, invariant 4).
//
// Index metadata the checkpointer writes (checkpointMeta):
//
//	raft-applied  index u64 | term u64 of the last entry folded into the index
//	raft-conf     entry index u64 | configuration bytes

import "encoding/binary"

// putEntryHeader returns a recEntry payload.
func putEntryHeader(index, term, id, first, recEnd uint64, kind EntryKind, data []byte) []byte {
	le := binary.LittleEndian
	hdr := make([]byte, entryHeaderLen, entryHeaderLen+len(data))
	le.PutUint64(hdr[0:], index)
	le.PutUint64(hdr[8:], term)
	le.PutUint64(hdr[16:], id)
	le.PutUint64(hdr[24:], first)
	le.PutUint64(hdr[32:], recEnd)
	hdr[40] = byte(kind)
	return append(hdr, data...)
}

// parseEntryHeader decodes a recEntry payload (data: a copy of the
// conf-change data of a kind 1 entry). ok is false if it is too short.
func parseEntryHeader(p []byte) (e entryInfo, ok bool) {
	if len(p) < entryHeaderLen {
		return e, false
	}
	le := binary.LittleEndian
	e = entryInfo{index: le.Uint64(p), term: le.Uint64(p[8:]), id: le.Uint64(p[16:]),
		first: le.Uint64(p[24:]), recEnd: le.Uint64(p[32:]), kind: EntryKind(p[40])}
	if e.kind == EntryConfChange {
		e.data = append([]byte(nil), p[entryHeaderLen:]...)
	}
	return e, true
}

// hardStateLen is the size of a recHardState payload.
const hardStateLen = 3 * 8

// putHardState returns a recHardState payload.
func putHardState(hs ReplicaHardState) []byte {
	v := make([]byte, hardStateLen)
	binary.LittleEndian.PutUint64(v[0:], hs.Term)
	binary.LittleEndian.PutUint64(v[8:], hs.Vote)
	binary.LittleEndian.PutUint64(v[16:], hs.Commit)
	return v
}

// parseHardState decodes a recHardState payload.
func parseHardState(p []byte) (ReplicaHardState, bool) {
	if len(p) < hardStateLen {
		return ReplicaHardState{}, false
	}
	le := binary.LittleEndian
	return ReplicaHardState{Term: le.Uint64(p), Vote: le.Uint64(p[8:]), Commit: le.Uint64(p[16:])}, true
}

// putConfState returns a recConfState payload (also the raft-conf
// metadata value).
func putConfState(idx uint64, cs []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(cs)), idx), cs...)
}

// parseConfState decodes a recConfState payload (cs: a copy).
func parseConfState(p []byte) (idx uint64, cs []byte, ok bool) {
	if len(p) < 8 {
		return 0, nil, false
	}
	return binary.LittleEndian.Uint64(p), append([]byte(nil), p[8:]...), true
}
