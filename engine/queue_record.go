package engine

// Queue records and the index value of a queue (same bytes). Part of the
// on-disk format; never change (add fields at the end, guarded by length;
// testdata/golden/queue-value.hex pins it, format_test.go).
//
//	queue id u64 | stripes u16 | create ms i64 | modify ms i64 |
//	delay ms i64 | max bytes u32 | retention ms i64 | visibility ms i64 |
//	polling wait ms i64 | logging u8 | name length u16 | name
//
// then, only for a queue with a dead-letter policy (deadletter.go; absent
// otherwise, so such a value is byte for byte the older one):
//
//	dead-letter queue name length u16 | name | max receive count u32

import (
	"encoding/binary"
	"fmt"
	"time"
)

const queueValFixed = 8 + 2 + 8 + 8 + 8 + 4 + 8 + 8 + 8 + 1 + 2

type queueVal struct {
	id       uint64
	stripes  int
	createMs int64
	modifyMs int64
	cfg      QueueConfig
	name     string
}

func (q *Queue) value() queueVal {
	m := q.meta()
	return queueVal{id: q.id, stripes: len(q.stripes), createMs: m.createMs, modifyMs: m.modifyMs, cfg: m.cfg, name: q.name}
}

func (v *queueVal) encode() []byte {
	n := queueValFixed + len(v.name)
	if v.cfg.DeadLetterQueue != "" {
		n += 2 + len(v.cfg.DeadLetterQueue) + 4
	}
	b := make([]byte, n)
	le := binary.LittleEndian
	le.PutUint64(b[0:], v.id)
	le.PutUint16(b[8:], uint16(v.stripes))
	le.PutUint64(b[10:], uint64(v.createMs))
	le.PutUint64(b[18:], uint64(v.modifyMs))
	le.PutUint64(b[26:], uint64(v.cfg.Delay.Milliseconds()))
	le.PutUint32(b[34:], uint32(v.cfg.MaxMessageBytes))
	le.PutUint64(b[38:], uint64(v.cfg.Retention.Milliseconds()))
	le.PutUint64(b[46:], uint64(v.cfg.VisibilityTimeout.Milliseconds()))
	le.PutUint64(b[54:], uint64(v.cfg.PollingWait.Milliseconds()))
	if v.cfg.LoggingEnabled {
		b[62] = 1
	}
	le.PutUint16(b[63:], uint16(len(v.name)))
	copy(b[queueValFixed:], v.name)
	if d := v.cfg.DeadLetterQueue; d != "" {
		off := queueValFixed + len(v.name)
		le.PutUint16(b[off:], uint16(len(d)))
		copy(b[off+2:], d)
		le.PutUint32(b[off+2+len(d):], uint32(v.cfg.MaxReceiveCount))
	}
	return b
}

func decodeQueueVal(b []byte) (queueVal, error) {
	var v queueVal
	if len(b) < queueValFixed {
		return v, fmt.Errorf("%w: queue value of %d bytes", errBadRecord, len(b))
	}
	le := binary.LittleEndian
	ms := func(off int) time.Duration { return time.Duration(int64(le.Uint64(b[off:]))) * time.Millisecond }
	v.id = le.Uint64(b[0:])
	v.stripes = int(le.Uint16(b[8:]))
	v.createMs = int64(le.Uint64(b[10:]))
	v.modifyMs = int64(le.Uint64(b[18:]))
	v.cfg.Delay = ms(26)
	v.cfg.MaxMessageBytes = int(le.Uint32(b[34:]))
	v.cfg.Retention = ms(38)
	v.cfg.VisibilityTimeout = ms(46)
	v.cfg.PollingWait = ms(54)
	v.cfg.LoggingEnabled = b[62] == 1
	n := int(le.Uint16(b[63:]))
	if len(b) < queueValFixed+n || v.stripes < 1 || v.stripes > 256 {
		return v, fmt.Errorf("%w: queue value (name %d bytes, stripes %d)", errBadRecord, n, v.stripes)
	}
	v.name = string(b[queueValFixed : queueValFixed+n])
	if rest := b[queueValFixed+n:]; len(rest) > 0 {
		if len(rest) < 2 {
			return v, fmt.Errorf("%w: queue value dead-letter policy of %d bytes", errBadRecord, len(rest))
		}
		dn := int(le.Uint16(rest))
		if dn == 0 || len(rest) < 2+dn+4 {
			return v, fmt.Errorf("%w: queue value dead-letter policy (name %d bytes of %d)", errBadRecord, dn, len(rest))
		}
		v.cfg.DeadLetterQueue = string(rest[2 : 2+dn])
		v.cfg.MaxReceiveCount = int(le.Uint32(rest[2+dn:]))
	}
	return v, nil
}

// msgSnap is a decoded message snapshot (record.go's layout).
type msgSnap struct {
	qid      uint64
	seq      uint64
	enqMs    int64
	visOff   uint32
	firstOff uint32
	expOff   uint32
	dequeues uint32
	gen      uint32
	slot     uint32
	stripe   uint8
	prio     uint8
	bodyPos  uint64
	recSize  uint32
}

func decodeSnap(b []byte) (msgSnap, error) {
	if len(b) < snapLen {
		return msgSnap{}, fmt.Errorf("%w: snapshot of %d bytes", errBadRecord, len(b))
	}
	le := binary.LittleEndian
	s := msgSnap{
		qid:      le.Uint64(b[0:8]),
		seq:      le.Uint64(b[8:16]),
		enqMs:    int64(le.Uint64(b[16:24])),
		visOff:   le.Uint32(b[24:28]),
		firstOff: le.Uint32(b[28:32]),
		expOff:   le.Uint32(b[32:36]),
		dequeues: le.Uint32(b[36:40]),
		gen:      le.Uint32(b[40:44]),
		slot:     le.Uint32(b[44:48]),
		stripe:   b[48],
		prio:     b[49],
		bodyPos:  le.Uint64(b[52:60]),
		recSize:  le.Uint32(b[60:64]),
	}
	if s.seq == 0 || s.prio < MinPriority || s.prio > MaxPriority || s.slot >= maxSlots {
		return s, fmt.Errorf("%w: snapshot seq %d prio %d slot %d", errBadRecord, s.seq, s.prio, s.slot)
	}
	return s, nil
}

// setBody stores the body location in an encoded snapshot.
func setSnapBody(b []byte, pos uint64, size uint32) {
	binary.LittleEndian.PutUint64(b[52:60], pos)
	binary.LittleEndian.PutUint32(b[60:64], size)
}
