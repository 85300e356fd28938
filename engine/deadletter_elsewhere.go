package engine

// Dead-letter queues held by another broker: a cluster keeps each shard's
// queues in a broker of its own, and a queue's policy may name a queue of
// another shard. A move inside one broker is one log record
// (deadletter.go); a move to another broker cannot be, so it is two steps
// in order, the copy first.
//
// The broker's DeadLetterRouter (Options) says which queue names are held
// elsewhere and carries messages there.
//
// How (moveElsewhere), never holding a lock across the hop:
//
//  1. a receive that finds a message due for the move hides it without
//     counting a dequeue (hideForMoveLocked, as for a local move; a state
//     record), for its visibility timeout or twice moveTimeout if longer,
//     so that the hide outlasts the hop, and gets the handle of that hide;
//  2. the messages' bodies and properties are read and made into the
//     messages as they enter the target: the DLQ system properties, the
//     source's EnqueueTime, expiry and priority (MovedMessage);
//  3. the router stores them in the target queue, durably, as one batch
//     (Queue.AcceptMoved on the broker that holds it);
//  4. only then are the sources deleted with the handles of step 1, durably,
//     as DeleteMessage deletes.
//
// Invariants:
//  1. No message is lost: a source is deleted only after the target
//     acknowledged its copy durable (step 4 after step 3).
//  2. At least once: a crash, a change of leader or a lost answer between
//     steps 3 and 4 leaves a message in both queues. It becomes visible in
//     the source when its hide ends and is moved again; the copies carry
//     the same DLQOriginMessageId.
//  3. A hop that fails (the target gone, no leader, the network) leaves
//     the messages hidden in the source, visible again when the hide ends
//     (at least 10 s), as a local move that cannot proceed does. The
//     receive does not fail for it.
//  4. A policy whose target does not exist where the router looks is
//     inert, as a local one is (deadletter.go).
//
// Owner: the stripes' mutexes, as for every message change; the router
// owns the hop.

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math"
	"time"
)

// DeadLetterRouter carries dead-lettered messages to queues a broker does
// not hold (Options.DeadLetterRouter). engine/cluster gives each shard's
// broker one, so that a policy may name a queue of another shard.
type DeadLetterRouter interface {
	// Elsewhere reports whether the queue named name is held by another
	// broker, which Move reaches.
	Elsewhere(name string) bool
	// Exists reports whether the queue named name exists there. It is
	// asked when a policy or a subscription names it, before each move,
	// and after a failed hop; the answer may trail the target's own by a
	// replication lag.
	Exists(name string) bool
	// CatchUp waits, for a bounded time, until Exists's view of the queue
	// named name includes every change acknowledged before the call, so
	// that a queue just created through another broker can be named at
	// once. The engine calls it before a policy or a subscription naming
	// such a queue is checked, holding no lock.
	CatchUp(name string)
	// Move stores ms (1..MaxBatch messages) in the queue named target with
	// Queue.AcceptMoved, and returns nil only once they are durable there.
	// An error means they may or may not have been stored.
	Move(ctx context.Context, target string, ms []MovedMessage) error
}

// A MovedMessage is a dead-lettered message on its way to a queue of
// another broker (DeadLetterRouter).
type MovedMessage struct {
	Body []byte
	// Props is its properties block, the DLQ system properties included,
	// in the log's encoding: opaque outside the engine, checked by
	// AcceptMoved.
	Props     []byte
	EnqueueMs int64 // its EnqueueTime where it was first sent, Unix ms
	ExpireMs  int64 // when it expires, Unix ms: a move keeps the retention
	Priority  int
}

// A MovedMessage with EnqueueMs and ExpireMs 0 is a topic's delivery to a
// queue of another broker (topic_relay.go): it enters as a new message,
// as a publish's delivery does on one broker (publish.go invariant 5):
// sent now, delayed by the queue's DelaySeconds, kept for its retention,
// and no larger than its MaximumMessageSize.
func (m *MovedMessage) delivery() bool { return m.EnqueueMs == 0 && m.ExpireMs == 0 }

// maxDeliveryBytes bounds a topic's delivery to a queue: a published body
// of MaxMessageBytes with every byte escaped in its XML or JSON envelope
// (at most 6 bytes each: "&quot;", "\u001f"), and the envelope's other
// fields (names, the owner taken from the Host header) with room to spare.
const maxDeliveryBytes = 6*MaxMessageBytes + 64<<10

// Delivery reports whether m is a topic's delivery (EnqueueMs and
// ExpireMs 0), not a dead letter: for a router's counters.
func (m *MovedMessage) Delivery() bool { return m.delivery() }

// catchUp readies the router's view of a queue held elsewhere for an
// admin check (DeadLetterRouter.CatchUp). Never under adminMu or an
// admission: it may wait for another broker.
func (b *Broker) catchUp(name string) {
	if name != "" && b.relayed(name) {
		b.opts.DeadLetterRouter.CatchUp(name)
	}
}

// moveTimeout bounds one hop of moveElsewhere: a receive waits for it.
const moveTimeout = 5 * time.Second

// deadLetterElsewhere returns the name of m's dead-letter target when a
// router holds it and it exists, else "".
func (q *Queue) deadLetterElsewhere(m *queueMeta) string {
	r := q.b.opts.DeadLetterRouter
	name := m.cfg.DeadLetterQueue
	if r == nil || name == "" || !r.Elsewhere(name) || !r.Exists(name) {
		return ""
	}
	return name
}

// moveElsewhere moves the messages hidden in mv to the queue mv.elsewhere
// names, through the broker's router, and returns how many it moved.
// Messages it cannot move stay hidden (invariant 3). It fails only on a
// storage failure of the source.
func (q *Queue) moveElsewhere(mv *moves) (int, error) {
	r := q.b.getReader()
	defer q.b.putReader(r)
	var msg Message
	var batch [MaxBatch]MovedMessage
	var handles [MaxBatch]ReceiptHandle
	n := 0
	now := q.b.nowMs()
	for i := 0; i < mv.n; i++ {
		ml := &mv.locs[i]
		loc := ml.loc
		if !q.readForMove(r, &msg, &loc) || ml.expMs <= now {
			continue // not readable now, or it expires where it is
		}
		batch[n] = MovedMessage{
			Body:      append([]byte(nil), msg.Body...),
			Props:     q.deadLetterProps(&msg, loc.seq),
			EnqueueMs: ml.enqMs,
			ExpireMs:  ml.expMs,
			Priority:  ml.prio,
		}
		handles[n] = q.key.issue(loc.stripe, loc.slot, loc.seq, ml.gen)
		n++
	}
	mv.n = 0
	if n == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	err := q.b.opts.DeadLetterRouter.Move(ctx, mv.elsewhere, batch[:n])
	cancel()
	if err != nil {
		q.b.log.Warn("messages not moved to their dead-letter queue on another shard; they stay hidden for their visibility timeout (10 s at least), then a later receive moves them",
			"queue", q.name, "dead_letter_queue", mv.elsewhere, "messages", n, "err", err)
		return 0, nil
	}
	var errs [MaxBatch]error
	if _, err := q.delete(handles[:n], errs[:n], true); err != nil {
		if errors.Is(err, ErrRetryOnLeader) || errors.Is(err, ErrQueueNotExist) || errors.Is(err, ErrClosed) {
			return 0, nil // the copies stay (invariant 2)
		}
		return 0, err
	}
	moved := 0
	for _, e := range errs[:n] {
		if e == nil {
			moved++
		}
	}
	q.deadLettered.Add(int64(moved))
	return moved, nil
}

// AcceptMoved stores messages another broker's dead-letter policy moves
// here (DeadLetterRouter): each enters as a new message, visible now, with
// the EnqueueTime, expiry, priority and properties it carries and
// DequeueCount 0. A topic's delivery (EnqueueMs and ExpireMs 0) enters as
// a new message of this queue instead (MovedMessage). The whole batch is
// checked first; a bad entry fails the call with an *ArgumentError and
// nothing is stored. AcceptMoved returns once the batch is durable, as
// Send does.
func (q *Queue) AcceptMoved(ms []MovedMessage) error {
	if err := q.b.usable(); err != nil {
		return err
	}
	if len(ms) < 1 || len(ms) > MaxBatch {
		return argErr("Messages", "must hold between 1 and %d messages", MaxBatch)
	}
	now := q.b.nowMs()
	meta := q.meta()
	var scratch []Property
	for i := range ms {
		m := &ms[i]
		limit := MaxMessageBytes
		if m.delivery() {
			limit = maxDeliveryBytes
		}
		var err error
		switch {
		case len(m.Body) == 0 || len(m.Body) > limit:
			err = argErr("MessageBody", "is %d bytes, not between 1 and %d", len(m.Body), limit)
		case m.Priority < MinPriority || m.Priority > MaxPriority:
			err = rangeErr("Priority", MinPriority, MaxPriority, "")
		case m.delivery():
			// Stored whatever the queue's MaximumMessageSize, as a
			// delivery on the topic's own shard is (publish.go): Subscribe
			// checked that the published message fits, and its XML or
			// JSON envelope is what makes it larger.
		case m.ExpireMs <= now:
			err = argErr("ExpireTime", "has passed: the message expired on its way")
		case m.EnqueueMs <= 0 || m.EnqueueMs > now+int64(time.Hour/time.Millisecond) ||
			m.ExpireMs-m.EnqueueMs > math.MaxUint32 || now-m.EnqueueMs > math.MaxUint32:
			err = argErr("EnqueueTime", "%d is not a time this broker can hold with expiry %d", m.EnqueueMs, m.ExpireMs)
		}
		if err == nil && len(m.Props) > 0 {
			if scratch, err = decodeProps(m.Props, scratch); err != nil {
				err = argErr("Properties", "are not a valid properties block: %v", err)
			}
		}
		if err != nil {
			return fmt.Errorf("moved message %d: %w", i, err)
		}
	}
	if err := q.b.store.acceptNew(); err != nil {
		return err
	}
	var recs [MaxBatch]logRec
	var heads [MaxBatch][bodyHeadLen]byte
	var slots [MaxBatch]uint32
	n := len(ms)
	st := &q.stripes[int(q.sendRR.Add(1))%len(q.stripes)]
	store := q.b.store
	st.mu.Lock()
	if st.dead {
		st.mu.Unlock()
		return q.goneErr()
	}
	for i := range ms {
		m := &ms[i]
		idx, ok := st.slab.alloc()
		if !ok {
			for j := 0; j < i; j++ {
				st.slab.release(slots[j])
			}
			st.mu.Unlock()
			return argErr("Messages", "stripe is full")
		}
		s := st.slab.at(idx)
		s.seq = q.seq.Add(1)
		if m.delivery() {
			s.setMeta(now, m.Priority, stPending)
			s.visOff = uint32(meta.delayMs)
			s.expOff = uint32(meta.retainMs)
		} else {
			s.setMeta(m.EnqueueMs, m.Priority, stPending)
			s.visOff = 0 // visible at once, on every replica whatever its clock (apply.go)
			s.expOff = uint32(m.ExpireMs - m.EnqueueMs)
		}
		s.tnext, s.tprev, s.next, s.prev = nilSlot, nilSlot, nilSlot, nilSlot
		slots[i] = idx
		sum := md5.Sum(m.Body)
		store.bodyRecord(&recs[i], &heads[i], q.id, st.idx, idx, s, &sum, m.Props, m.Body, false)
	}
	st.mu.Unlock()

	err := store.waitRoom()
	if err == nil {
		err = store.append(recs[:n])
	}
	if err != nil {
		q.b.storageFailed(err)
		st.mu.Lock()
		if !st.dead {
			for _, idx := range slots[:n] {
				st.slab.release(idx)
			}
		}
		st.mu.Unlock()
		return err
	}
	// Durable, then Active: as a local move's target (finishMoves).
	var ps [MaxBatch]pendingMove
	for i := range n {
		ps[i] = pendingMove{t: q, tst: st, tidx: slots[i], rec: recs[i], delayed: ms[i].delivery() && meta.delayMs > 0}
	}
	gone, err := q.finishMoves(ps[:n])
	if err == nil && gone > 0 {
		err = q.goneErr() // deleted meanwhile: the source keeps its messages
	}
	return err
}
