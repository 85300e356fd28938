package engine

// Sends lost in a damaged range of the log tail, found from the gaps they
// leave (repair.go).
//
// A damaged record skipped by a repair (Options.WAL.Repair) is listed as a
// lost record, with the message it named when its header survived. A send
// whose record was past the checkpoint was in no index: unless the header
// survived it was lost without a name, and a range of zeros (a truncated
// segment) names nothing at all. But each queue numbers its messages in
// one sequence per start (seq = boot<<bootShift | counter, Queue.send), so
// the sends replayed after a damaged range show the numbers it took.
//
// Invariants:
//  1. Only gaps between two replayed sends of one queue and one boot whose
//     records lie on either side of a skipped range are counted: a gap
//     there is a send whose record was in the range, a message sent and
//     deleted inside the range, or a number taken by a send that failed
//     before its record was written (a full disk, a stalled log, a full
//     stripe part way through a batch, a cluster's refused proposal). So
//     the list is an upper bound, and the report says the loss is
//     inferred.
//  2. A number any replayed record names (a delete, a state change) or
//     the index holds is not lost, and nor is any message of a queue a
//     replayed record deletes (its messages went with it).
//  3. Nothing of this runs unless a range was skipped (rs.skipped).
//
// Owner: recovery (load), single-threaded.

import (
	"encoding/binary"
	"slices"
)

// maxInferredLosses bounds the numbers one start reports as lost from
// gaps; a larger gap is reported as its first numbers and a count.
const maxInferredLosses = 100000

// gapSend is a replayed send: its message and its record's position.
type gapSend struct{ qid, seq, pos uint64 }

// gapFinder collects the replayed sends and the messages named by other
// records, while the tail is folded.
type gapFinder struct {
	sends []gapSend
	named map[msgKey]bool
	gone  map[uint64]bool // queues a replayed record deleted
	lost  map[msgKey]bool // after find: the numbers inferred lost, until the index names them
	more  int             // inferred beyond maxInferredLosses
}

// note (the replay loop) looks at one record.
func (g *gapFinder) note(pos uint64, typ uint8, payload []byte) {
	if typ == recQueueDelete && len(payload) >= 8 {
		if g.gone == nil {
			g.gone = map[uint64]bool{}
		}
		g.gone[binary.LittleEndian.Uint64(payload)] = true
		return
	}
	if typ == recDeadLetter && len(payload) >= 2*snapLen {
		g.note(pos, recDelete, payload[:snapLen])
		g.note(pos, recSendProps, payload[snapLen:])
		return
	}
	if len(payload) < snapLen || !isMsgRec(typ) {
		return
	}
	s, err := decodeSnap(payload)
	if err != nil {
		return
	}
	if isSendRec(typ) {
		g.sends = append(g.sends, gapSend{s.qid, s.seq, pos})
		return
	}
	if g.named == nil {
		g.named = map[msgKey]bool{}
	}
	g.named[msgKey{s.qid, s.seq}] = true
}

// isMsgRec reports whether typ is a record about one message (its payload
// starts with the message's snapshot).
func isMsgRec(typ uint8) bool {
	switch typ {
	case recSend, recSendProps, recRelocate, recRelocateProps, recState, recDelete, recExpire:
		return true
	}
	return false
}

// find works out the numbers lost in rs's skipped ranges (invariant 1).
func (g *gapFinder) find(rs *repairState) {
	slices.SortFunc(g.sends, func(a, b gapSend) int {
		return msgKey{a.qid, a.seq}.compare(msgKey{b.qid, b.seq})
	})
	g.lost = map[msgKey]bool{}
	for i := 1; i < len(g.sends); i++ {
		a, b := g.sends[i-1], g.sends[i]
		if a.qid != b.qid || g.gone[a.qid] || a.seq>>bootShift != b.seq>>bootShift || b.seq <= a.seq+1 || !rs.skippedBetween(a.pos, b.pos) {
			continue
		}
		for seq := a.seq + 1; seq < b.seq; seq++ {
			k := msgKey{a.qid, seq}
			switch {
			case g.named[k]:
			case len(g.lost) >= maxInferredLosses:
				g.more++
			default:
				g.lost[k] = true
			}
		}
	}
	g.sends, g.named, g.gone = nil, nil, nil
}

// skippedBetween reports whether a skipped range lies between positions a
// and b of the log (either order).
func (rs *repairState) skippedBetween(a, b uint64) bool {
	lo, hi := min(a, b), max(a, b)
	for _, s := range rs.spans {
		if s.to != ^uint64(0) && s.from > lo && s.to <= hi {
			return true
		}
	}
	return false
}

// report adds the numbers still lost (the index did not name them,
// invariant 2) to the repair report, and returns how many.
func (g *gapFinder) report(b *Broker, rs *repairState) int {
	keys := make([]msgKey, 0, len(g.lost))
	for k := range g.lost {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, msgKey.compare)
	for _, k := range keys {
		name := ""
		if q := b.byID[k.qid]; q != nil {
			name = q.name
		}
		rs.report.LostMessages = append(rs.report.LostMessages, reportedLoss{MessageID: b.messageID(k.qid, k.seq).String(),
			Queue: name, QueueID: k.qid, Reason: "its send was in a damaged range of the log: inferred from the gap it left in the queue's message numbers"})
	}
	if len(keys) > 0 || g.more > 0 {
		rs.changed = true
	}
	if g.more > 0 {
		b.log.Warn("more messages lost to log damage than the report lists", "listed", len(keys), "more", g.more)
	}
	return len(keys) + g.more
}
