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
// Types 10-12 are the replicated log's (replica.go); 10-19 are reserved for
// them and for topics. Message records with properties (props.go) and
// dead-letter moves (deadletter.go), from 20 on:
//
//	type 20 sendProps     message snapshot, MD5 (16), properties length u32,
//	                      properties (props.go's block), body: a send whose
//	                      message has properties (type 4 otherwise)
//	type 21 relocateProps as type 20, written by compaction (as type 8)
//	type 22 bodyProps     queue id u32, stripe u8, slot u32, MD5 (16),
//	                      properties length u32, properties, body
//	                      (in-memory mode only, as type 9)
//	type 23 deadLetter    the source message's snapshot as it left its queue
//	                      (readers use only its queue id and seq, as for a
//	                      delete), then a type 20 payload: the message as it
//	                      enters the dead-letter queue. One record, so a
//	                      move is atomic: after a crash the message is in
//	                      exactly one of the two queues.
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

	recTopic         uint8 = 32
	recTopicDelete   uint8 = 33
	recSubscription  uint8 = 34
	recUnsubscribe   uint8 = 35
	recPublish       uint8 = 36
	recSendProps     uint8 = 20
	recRelocateProps uint8 = 21
	recBodyProps     uint8 = 22
	recDeadLetter    uint8 = 23
)

// isSendRec reports whether typ is a send (with or without properties).
func isSendRec(typ uint8) bool { return typ == recSend || typ == recSendProps }

// isRelocateRec reports whether typ is a relocation (with or without
// properties).
func isRelocateRec(typ uint8) bool { return typ == recRelocate || typ == recRelocateProps }

// hasProps reports whether records of type typ carry a properties block.
func hasProps(typ uint8) bool {
	return typ == recSendProps || typ == recRelocateProps || typ == recBodyProps || typ == recDeadLetter
}

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
	case recBody, recBodyProps:
		if len(payload) < bodyIDLen {
			return 0, 0, 0, false
		}
		return uint64(le.Uint32(payload[0:4])), payload[4], le.Uint32(payload[5:9]), true
	case recDeadLetter:
		if len(payload) < 2*snapLen {
			return 0, 0, 0, false
		}
		return le.Uint64(payload[snapLen:]), payload[snapLen+48], le.Uint32(payload[snapLen+44:]), true
	case recSend, recRelocate, recSendProps, recRelocateProps:
		if len(payload) < snapLen {
			return 0, 0, 0, false
		}
		return le.Uint64(payload[0:8]), payload[48], le.Uint32(payload[44:48]), true
	}
	return 0, 0, 0, false
}

// bodyOf returns the MD5, properties block (props.go; nil for the types
// without one) and body held by a body-carrying record.
func bodyOf(typ uint8, payload []byte) (md5 [16]byte, props, body []byte, err error) {
	var off int
	switch typ {
	case recBody, recBodyProps:
		off = bodyIDLen
	case recSend, recRelocate, recSendProps, recRelocateProps:
		off = snapLen
	case recDeadLetter:
		off = 2 * snapLen
	default:
		return md5, nil, nil, fmt.Errorf("%w: type %d holds no body", errBadRecord, typ)
	}
	if len(payload) < off+16 {
		return md5, nil, nil, fmt.Errorf("%w: type %d payload of %d bytes", errBadRecord, typ, len(payload))
	}
	copy(md5[:], payload[off:off+16])
	off += 16
	if hasProps(typ) {
		if len(payload) < off+4 {
			return md5, nil, nil, fmt.Errorf("%w: type %d payload of %d bytes", errBadRecord, typ, len(payload))
		}
		n := int(binary.LittleEndian.Uint32(payload[off:]))
		off += 4
		if n > len(payload)-off {
			return md5, nil, nil, fmt.Errorf("%w: type %d properties of %d bytes", errBadRecord, typ, n)
		}
		props = payload[off : off+n : off+n]
		off += n
	}
	return md5, props, payload[off:], nil
}

// putPropsHead returns head (a snapshot or owner id of idLen bytes, then
// the MD5, already filled in) extended by the properties length and block.
func putPropsHead(head []byte, idLen int, props []byte) []byte {
	h := make([]byte, idLen+16+4+len(props))
	copy(h, head[:idLen+16])
	binary.LittleEndian.PutUint32(h[idLen+16:], uint32(len(props)))
	copy(h[idLen+20:], props)
	return h
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
