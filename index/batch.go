package index

import "fmt"

// opKind says what one Batch operation does.
type opKind uint8

const (
	opPutMeta opKind = iota + 1
	opPutQueue
	opDeleteQueue
	opPutMessage
	opDeleteMessage
	opPutTopic
	opDeleteTopic
	opPutSub
	opDeleteSub
	opPutCount
	opDeleteCount
)

// String returns the operation's name, for error messages and tests.
func (k opKind) String() string {
	switch k {
	case opPutMeta:
		return "PutMeta"
	case opPutQueue:
		return "PutQueue"
	case opDeleteQueue:
		return "DeleteQueue"
	case opPutMessage:
		return "PutMessage"
	case opDeleteMessage:
		return "DeleteMessage"
	case opPutTopic:
		return "PutTopic"
	case opDeleteTopic:
		return "DeleteTopic"
	case opPutSub:
		return "PutSubscription"
	case opDeleteSub:
		return "DeleteSubscription"
	case opPutCount:
		return "PutTopicCount"
	case opDeleteCount:
		return "DeleteTopicCount"
	default:
		return fmt.Sprintf("opKind(%d)", uint8(k))
	}
}

// op is one recorded operation. Its encoded key and (for puts) its value sit
// back to back in Batch.arena at [off, off+klen) and [off+klen, off+klen+vlen).
type op struct {
	off  int    // start of the key in Batch.arena
	klen uint32 // key length
	vlen uint32 // value length (0 for deletes)
	kind opKind
}

// Batch collects index changes to apply together with Store.Commit.
//
// A Batch is not safe for concurrent use: one goroutine (the engine's
// checkpointer) owns it. Operations apply in the order they were recorded;
// for the same key the last one wins. All keys and values are copied into
// one growing byte arena, so recording an operation allocates nothing once
// the arena and the op slice have reached their working size (Reset keeps
// both).
type Batch struct {
	arena    []byte // keys and values of ops, back to back
	ops      []op   // recorded operations, in order
	deletes  int    // number of opDeleteQueue in ops (0: no filtering at commit)
	pos      uint64 // the position to write last, if hasPos
	hasPos   bool
	maxValue int   // largest value accepted (Options.maxValueBytes)
	err      error // first invalid operation; Commit returns it
}

// NewBatch returns an empty batch for s. It does not touch the database and
// works on a closed store too (Commit will then fail with ErrClosed).
func (s *Store) NewBatch() *Batch {
	return &Batch{maxValue: s.maxValue}
}

// Len returns the number of operations recorded since the batch was created
// or Reset, counting a SetPosition once.
func (b *Batch) Len() int {
	n := len(b.ops)
	if b.hasPos {
		n++
	}
	return n
}

// Bytes returns the number of key and value bytes the batch holds, a measure
// for "this batch is big enough to commit".
func (b *Batch) Bytes() int { return len(b.arena) }

// Reset empties the batch and keeps its memory for reuse.
func (b *Batch) Reset() {
	b.arena = b.arena[:0]
	b.ops = b.ops[:0]
	b.deletes = 0
	b.pos, b.hasPos = 0, false
	b.err = nil
}

// PutMeta sets broker metadata entry name to a copy of val.
func (b *Batch) PutMeta(name string, val []byte) {
	if len(name) > MaxMetaNameBytes && b.err == nil {
		b.err = fmt.Errorf("%w: PutMeta name of %d bytes (max %d)", ErrKeyTooLarge, len(name), MaxMetaNameBytes)
	}
	off := len(b.arena)
	b.arena = appendMetaKey(b.arena, name)
	b.put(opPutMeta, off, val)
}

// PutQueue sets the value of queue id to a copy of val.
func (b *Batch) PutQueue(id uint64, val []byte) {
	off := len(b.arena)
	b.arena = appendQueueKey(b.arena, id)
	b.put(opPutQueue, off, val)
}

// DeleteQueue removes queue id and, when the batch is committed, every
// message of that queue: those already in the store and those put earlier in
// this batch. Messages of queue id put later in the batch survive.
func (b *Batch) DeleteQueue(id uint64) {
	off := len(b.arena)
	b.arena = appendQueueKey(b.arena, id)
	b.ops = append(b.ops, op{off: off, klen: queueKeyLen, kind: opDeleteQueue})
	b.deletes++
}

// PutMessage sets message (queueID, seq) to a copy of val.
func (b *Batch) PutMessage(queueID, seq uint64, val []byte) {
	off := len(b.arena)
	b.arena = appendMessageKey(b.arena, queueID, seq)
	b.put(opPutMessage, off, val)
}

// DeleteMessage removes message (queueID, seq); deleting an absent message
// is not an error.
func (b *Batch) DeleteMessage(queueID, seq uint64) {
	off := len(b.arena)
	b.arena = appendMessageKey(b.arena, queueID, seq)
	b.ops = append(b.ops, op{off: off, klen: messageKeyLen, kind: opDeleteMessage})
}

// PutTopic sets the value of topic id to a copy of val.
func (b *Batch) PutTopic(id uint64, val []byte) {
	b.putID(opPutTopic, prefixTopic, id, val)
}

// DeleteTopic removes topic id (its subscriptions are the caller's to
// delete: the index does not know which they are).
func (b *Batch) DeleteTopic(id uint64) {
	b.deleteID(opDeleteTopic, prefixTopic, id)
}

// PutSubscription sets the value of subscription id to a copy of val.
func (b *Batch) PutSubscription(id uint64, val []byte) {
	b.putID(opPutSub, prefixSub, id, val)
}

// DeleteSubscription removes subscription id; deleting an absent one is not
// an error.
func (b *Batch) DeleteSubscription(id uint64) {
	b.deleteID(opDeleteSub, prefixSub, id)
}

// PutTopicCount sets topic id's publish counts to a copy of val.
func (b *Batch) PutTopicCount(id uint64, val []byte) {
	b.putID(opPutCount, prefixCount, id, val)
}

// DeleteTopicCount removes topic id's publish counts; deleting absent ones
// is not an error.
func (b *Batch) DeleteTopicCount(id uint64) {
	b.deleteID(opDeleteCount, prefixCount, id)
}

// putID records a put of id's key in the id key space prefix.
func (b *Batch) putID(kind opKind, prefix byte, id uint64, val []byte) {
	off := len(b.arena)
	b.arena = appendIDKey(b.arena, prefix, id)
	b.put(kind, off, val)
}

// deleteID records a delete of id's key in the id key space prefix.
func (b *Batch) deleteID(kind opKind, prefix byte, id uint64) {
	off := len(b.arena)
	b.arena = appendIDKey(b.arena, prefix, id)
	b.ops = append(b.ops, op{off: off, klen: idKeyLen, kind: kind})
}

// SetPosition makes Commit write pos as the checkpoint position, after the
// rest of the batch is durable (invariant 2). The last call wins.
func (b *Batch) SetPosition(pos uint64) {
	b.pos, b.hasPos = pos, true
}

// put finishes a put whose key was appended to the arena at off.
func (b *Batch) put(kind opKind, off int, val []byte) {
	if len(val) > b.maxValue && b.err == nil {
		b.err = fmt.Errorf("%w: %v value of %d bytes (max %d)", ErrValueTooLarge, kind, len(val), b.maxValue)
	}
	klen := len(b.arena) - off
	b.arena = append(b.arena, val...)
	b.ops = append(b.ops, op{off: off, klen: uint32(klen), vlen: uint32(len(val)), kind: kind})
}

// key returns o's key; valid until the batch is changed.
func (b *Batch) key(o op) []byte {
	return b.arena[o.off : o.off+int(o.klen) : o.off+int(o.klen)]
}

// value returns o's value; valid until the batch is changed.
func (b *Batch) value(o op) []byte {
	start := o.off + int(o.klen)
	return b.arena[start : start+int(o.vlen) : start+int(o.vlen)]
}
