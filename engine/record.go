package engine

// Log records: the engine's state changes, in the order they were applied.
//
// Record type numbers and payload layouts are part of the on-disk format;
// never change them (add new types instead). All integers are little endian.
// testdata/golden holds every one as the code writes it (format_test.go).
//
//	type 1 queueCreate  queue value (queue_record.go): id, stripes, create and
//	                    modify times, config, name
//	type 2 queueConfig  queue value, as for create, with the new config and
//	                    modify time
//	type 3 queueDelete  queue id u64
//	type 4 send         message snapshot (64 bytes, below), MD5 (16), body
//	type 5 state        message snapshot after a receive or visibility change
//	type 6 delete       message snapshot as it was when deleted (readers use
//	                    only its queue id and seq)
//	type 7 expire       message snapshot as it was when it expired (likewise)
//	type 8 relocate     message snapshot, MD5 (16), body: compaction moved the
//	                    body here
//	type 9 body         queue id u32, stripe u8, slot u32, MD5 (16), body
//	                    (in-memory mode only, never on disk: bodies, no state)
//	types 10-12         a replicated shard's entry headers, hard state and
//	                    configuration (replica_record.go)
//	types 32..35        topics and subscriptions (topic_record.go)
//	type 36 publish     the header of a publish group (publish.go)
//
// Types 13..31 are left to queue records; topic records start at 32.
//
// Invariant: records about one message are appended while holding its
// stripe's lock (or, for send, before anything else can reference it), so the
// log order of a message's records is the order its changes were applied and
// replaying "last record wins" rebuilds its state.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	recQueueCreate uint8 = 1
	recQueueConfig uint8 = 2
	recQueueDelete uint8 = 3
	recSend        uint8 = 4
	recState       uint8 = 5
	recDelete      uint8 = 6
	recExpire      uint8 = 7
	recRelocate    uint8 = 8
	recBody        uint8 = 9

	recTopic        uint8 = 32
	recTopicDelete  uint8 = 33
	recSubscription uint8 = 34
	recUnsubscribe  uint8 = 35
	recPublish      uint8 = 36
)

// errBadRecord: a record that passed the log's checksum but does not parse.
var errBadRecord = errors.New("engine: malformed log record")

// snapLen is the size of a message snapshot in send, state and relocate
// records:
//
//	queue id u64 | seq u64 | enqueue ms i64 | visOff u32 | firstOff u32 |
//	expOff u32 | dequeues u32 | gen u32 | slot u32 | stripe u8 | prio u8 |
//	state u8 | reserved u8 | body pos u64 | body record size u32
//
// In send and relocate records the body position and size fields say
// nothing (send: zero; relocate: where the body was before it moved): the
// body is in the record itself, whose own position and size readers use
// (fold.go). In state, delete and expire records they locate the body.
const snapLen = 8 + 8 + 8 + 4*6 + 4 + 8 + 4

// bodyIDLen is the size of the owner identity at the start of a body record.
const bodyIDLen = 4 + 1 + 4

// putBodyID encodes a body record's owner: the queue id (low 32 bits; queue
// ids of one in-memory broker never exceed them), stripe and slot.
func putBodyID(b []byte, qid uint64, stripe uint8, slotIdx uint32) {
	binary.LittleEndian.PutUint32(b[0:4], uint32(qid))
	b[4] = stripe
	binary.LittleEndian.PutUint32(b[5:9], slotIdx)
}

// ownerOf returns the slot that a body-carrying record may belong to.
func ownerOf(typ uint8, payload []byte) (qid uint64, stripe uint8, slotIdx uint32, ok bool) {
	le := binary.LittleEndian
	switch typ {
	case recBody:
		if len(payload) < bodyIDLen {
			return 0, 0, 0, false
		}
		return uint64(le.Uint32(payload[0:4])), payload[4], le.Uint32(payload[5:9]), true
	case recSend, recRelocate:
		if len(payload) < snapLen {
			return 0, 0, 0, false
		}
		return le.Uint64(payload[0:8]), payload[48], le.Uint32(payload[44:48]), true
	}
	return 0, 0, 0, false
}

// bodyOf returns the MD5 and body held by a body-carrying record.
func bodyOf(typ uint8, payload []byte) (md5 [16]byte, body []byte, err error) {
	var off int
	switch typ {
	case recBody:
		off = bodyIDLen
	case recSend, recRelocate:
		off = snapLen
	default:
		return md5, nil, fmt.Errorf("%w: type %d holds no body", errBadRecord, typ)
	}
	if len(payload) < off+16 {
		return md5, nil, fmt.Errorf("%w: type %d payload of %d bytes", errBadRecord, typ, len(payload))
	}
	copy(md5[:], payload[off:off+16])
	return md5, payload[off+16:], nil
}

// putSnap encodes slot s of stripe st, queue qid into b (len >= snapLen).
func putSnap(b []byte, qid uint64, stripe uint8, slotIdx uint32, s *slot) {
	le := binary.LittleEndian
	le.PutUint64(b[0:8], qid)
	le.PutUint64(b[8:16], s.seq)
	le.PutUint64(b[16:24], uint64(s.enqueueMs()))
	le.PutUint32(b[24:28], s.visOff)
	le.PutUint32(b[28:32], s.firstOff)
	le.PutUint32(b[32:36], s.expOff)
	le.PutUint32(b[36:40], s.dequeues)
	le.PutUint32(b[40:44], s.gen)
	le.PutUint32(b[44:48], slotIdx)
	b[48] = stripe
	b[49] = uint8(s.prio())
	b[50] = s.state()
	b[51] = 0
	le.PutUint64(b[52:60], s.bodyPos)
	le.PutUint32(b[60:64], s.recSize)
}
