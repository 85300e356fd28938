package engine

// Starting on a damaged log (recovery.go): what a repair lost, and a report.
//
// The log cuts a torn tail at Open, and with Options.WAL.Repair (smqd
// --wal-repair) it covers damaged records in the middle with skip records and
// keeps every valid record after them (wal/repair.go). The engine then:
//
//  1. replays from the first record at or after the checkpoint position
//     (wal.Log.ReplayStart: the position may lie inside a skipped range);
//  2. treats as lost every message whose body lies where no record
//     survived: in a skipped range, or at or beyond the end of the log when
//     the index checkpointed past it (a tail cut after a clean stop, or
//     segments missing with Repair set). Such a message is not installed,
//     gets a delete record (so the next checkpoint drops it from the index),
//     and is reported;
//  3. moves the log's end past every position the index still refers to
//     (wal.Log.SkipTo), so that a new record never takes the position of
//     one the index describes;
//  4. settles the queues whose own records were lost (repair_queues.go): a
//     queue whose create record is gone but whose messages survive is
//     recreated; a lost config or delete record is reported with what the
//     queue is now;
//  5. logs every damaged range, lost message and affected queue at Warn level
//     and writes them to a report file, repair-<time>.json, in the data
//     directory.
//
// Without Repair, damage in the middle of the log fails Open (the log's error
// names the option), and an index ahead of a log that was not cut fails too;
// a torn tail is always cut, and what it held is reported the same way.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/smqd/smqd/wal"
)

// lostSpan is a range of log positions whose records did not survive.
type lostSpan struct{ from, to uint64 }

// repairState is what recovery needs to know about damage.
type repairState struct {
	spans   []lostSpan // skipped ranges, and [log end, ∞) when the index is ahead
	maxRef  uint64     // the highest position any installed message refers to, plus its size
	report  repairReport
	changed bool // something was repaired or lost: write a report
	skipped bool // a damaged range was skipped (not cut): records after it survive
	// resumed: an earlier --wal-repair start stopped before it settled
	// what its skip records cost: settle the orphans they left again.
	resumed bool

	// watch maps a queue id to its entry in report.Queues whose Messages
	// the rebuild fills with the ids of the messages it installs.
	watch map[uint64][]int
}

// lost reports whether a body at pos is gone.
func (rs *repairState) lost(pos uint64) bool {
	for _, s := range rs.spans {
		if pos >= s.from && pos < s.to {
			return true
		}
	}
	return false
}

// repairReport is the report file's content.
type repairReport struct {
	Time         time.Time        `json:"time"`
	Dir          string           `json:"dir"`
	Checkpoint   uint64           `json:"checkpoint"`
	LogEnd       uint64           `json:"log_end"`
	Ranges       []reportRange    `json:"ranges"`
	LostMessages []reportedLoss   `json:"lost_messages"`
	LostRecords  []reportedRecord `json:"lost_records"`
	Queues       []reportedQueue  `json:"queues,omitempty"`
}

type reportRange struct {
	Segment uint64 `json:"segment"`
	Start   uint64 `json:"start"`
	End     uint64 `json:"end"`
	Bytes   int64  `json:"bytes"`
	Reason  string `json:"reason"`
	Cut     bool   `json:"cut"`
}

type reportedLoss struct {
	MessageID string `json:"message_id"`
	Queue     string `json:"queue"` // empty when the queue itself is gone
	QueueID   uint64 `json:"queue_id"`
	BodyPos   uint64 `json:"body_pos"`
	Reason    string `json:"reason,omitempty"` // when not "its body is gone"
}

type reportedRecord struct {
	Pos       uint64 `json:"pos"`
	Type      string `json:"type"`
	MessageID string `json:"message_id,omitempty"` // when the damaged header still names it
	QueueID   uint64 `json:"queue_id,omitempty"`
	// NameFound is the queue name a damaged queue-create or queue-config
	// record still reads (unverified: the damage may be in it).
	NameFound string `json:"name_found,omitempty"`
}

// maxLoggedIDs bounds the message ids a log line lists (the report lists
// every one).
const maxLoggedIDs = 64

// recordTypeName names an engine record type for the report.
func recordTypeName(t uint8) string {
	switch t {
	case recQueueCreate:
		return "queue-create"
	case recQueueConfig:
		return "queue-config"
	case recQueueDelete:
		return "queue-delete"
	case recSend:
		return "send"
	case recState:
		return "state"
	case recDelete:
		return "delete"
	case recExpire:
		return "expire"
	case recRelocate:
		return "relocate"
	case recTopic:
		return "topic"
	case recTopicDelete:
		return "topic-delete"
	case recSubscription:
		return "subscription"
	case recUnsubscribe:
		return "unsubscribe"
	case recPublish:
		return "publish"
	case recTopicCount:
		return "topic-count"
	case recSendProps:
		return "send-props"
	case recRelocateProps:
		return "relocate-props"
	case recDeadLetter:
		return "dead-letter"
	}
	return fmt.Sprintf("unknown(%d)", t)
}

// planRepair looks at what the log's Open found and the checkpoint position
// cp, and returns where replay starts.
func (d *durableStore) planRepair(cp uint64, end wal.Pos) (from uint64, rs *repairState, err error) {
	ri := d.wal.Recovery()
	rs = &repairState{report: repairReport{Time: d.clock.Now().UTC(), Dir: d.opts.Dir, Checkpoint: cp, LogEnd: uint64(end)}}
	if d.repairResumed {
		rs.resumed, rs.changed = true, true
		d.log.Warn("an earlier --wal-repair start stopped before it finished: what its repair cost is settled again")
	}
	for _, r := range ri.Repairs {
		rs.changed = true
		rs.report.Ranges = append(rs.report.Ranges, reportRange{Segment: uint64(r.Segment), Start: uint64(r.Start),
			End: uint64(r.End), Bytes: r.Bytes, Reason: r.Reason, Cut: r.Cut})
		if !r.Cut {
			rs.spans = append(rs.spans, lostSpan{uint64(r.Start), uint64(r.End)})
			rs.skipped = true
		}
		d.log.Warn("log damage repaired", "range", r.String())
		for _, x := range r.Lost {
			rec := reportedRecord{Pos: uint64(x.Pos), Type: recordTypeName(uint8(x.Type))}
			le := binary.LittleEndian
			switch typ := uint8(x.Type); {
			case x.Flags&1 != 0:
			case len(x.Prefix) >= 16 && recordHasSnapshot(typ):
				rec.QueueID = le.Uint64(x.Prefix[0:8])
				rec.MessageID = makeMessageID(rec.QueueID|uint64(d.opts.MessageIDSpace)<<48, le.Uint64(x.Prefix[8:16])).String() // the id clients saw (Broker.messageID)
			case len(x.Prefix) >= 8 && (typ == recQueueCreate || typ == recQueueConfig || typ == recQueueDelete):
				rec.QueueID = le.Uint64(x.Prefix[0:8]) // queue records start with the queue id
				if typ != recQueueDelete && len(x.Prefix) >= queueValFixed {
					n := int(le.Uint16(x.Prefix[queueValFixed-2:]))
					if name := x.Prefix[queueValFixed:min(len(x.Prefix), queueValFixed+n)]; len(name) == n && ValidateQueueName(string(name)) == nil {
						rec.NameFound = string(name)
					}
				}
			}
			rs.report.LostRecords = append(rs.report.LostRecords, rec)
		}
	}
	if cp > uint64(end) {
		if !d.opts.WAL.Repair && !ri.TornTail {
			return 0, nil, fmt.Errorf("engine: the index checkpoint (%d) is beyond the end of the log (%d): the log lost data the index had; "+
				"start with --wal-repair (Options.WAL.Repair) to drop the messages whose bodies are gone and report them", cp, end)
		}
		// The bodies of what the index holds from the log's end on are
		// gone; the index's state of everything else is good.
		rs.changed = true
		rs.spans = append(rs.spans, lostSpan{uint64(end), ^uint64(0)})
		return uint64(end), rs, nil
	}
	// The checkpoint may lie inside skip records (a repair, or a SkipTo of
	// an earlier start): replay from the first record after it. When a
	// record starts at cp this costs one read.
	p, err := d.wal.ReplayStart(wal.Pos(cp))
	if err != nil {
		return 0, nil, fmt.Errorf("engine: find where replay starts: %w", err)
	}
	return uint64(p), rs, nil
}

// recordHasSnapshot reports whether records of type t start with a message
// snapshot (queue id, seq, ...).
func recordHasSnapshot(t uint8) bool {
	switch t {
	case recSend, recState, recDelete, recExpire, recRelocate, recSendProps, recRelocateProps, recDeadLetter:
		return true // a dead-letter record: the source message's
	}
	return false
}

// finishRepair moves the log's end past every position the index refers to
// and writes the report.
func (d *durableStore) finishRepair(rs *repairState, cp uint64) error {
	if target := max(cp, rs.maxRef); target > uint64(d.wal.End()) {
		end, err := d.wal.SkipTo(wal.Pos(target))
		if err == nil {
			err = d.wal.Sync()
		}
		if err != nil {
			return fmt.Errorf("engine: move the log past the index's positions: %w", err)
		}
		// Nothing before the new end needs replaying: record it as the
		// checkpoint position at once (a later checkpoint reads from there).
		batch := d.idx.NewBatch()
		batch.SetPosition(uint64(end))
		if err := d.commit(batch); err != nil {
			return fmt.Errorf("engine: move the checkpoint past the repaired end: %w", err)
		}
		d.cpPos.Store(uint64(end))
		d.log.Warn("log end moved past the positions the index refers to", "from", rs.report.LogEnd, "to", uint64(end))
	}
	if !rs.changed {
		return nil
	}
	for _, l := range rs.report.LostMessages {
		why := l.Reason
		if why == "" {
			why = "its body is gone"
		}
		d.log.Warn("message lost to log damage", "message_id", l.MessageID, "queue", l.Queue, "queue_id", l.QueueID,
			"body_pos", l.BodyPos, "reason", why)
	}
	for _, q := range rs.report.Queues {
		ids := q.Messages[:min(len(q.Messages), maxLoggedIDs)] // all of them in the report
		d.log.Warn("queue affected by log damage", "queue_id", q.QueueID, "queue", q.Name, "lost_record", q.Record,
			"name_found", q.NameFound, "outcome", q.Outcome, "reason", q.Reason, "messages", len(q.Messages), "message_ids", ids)
	}
	name := filepath.Join(d.opts.Dir, "repair-"+rs.report.Time.Format("20060102T150405.000Z")+".json")
	b, err := json.MarshalIndent(&rs.report, "", "  ")
	if err == nil {
		err = os.WriteFile(name, append(b, '\n'), 0o600)
	}
	if err != nil {
		return fmt.Errorf("engine: write the repair report: %w", err)
	}
	d.log.Warn("repair report written", "file", name, "damaged_ranges", len(rs.report.Ranges),
		"lost_messages", len(rs.report.LostMessages), "lost_records", len(rs.report.LostRecords), "queues", len(rs.report.Queues))
	return nil
}

// repairPendingName marks a data directory while a --wal-repair start
// settles what its repair cost. The log's Open writes its skip records
// first; a crash before the recreated queues' records and the report are
// written would leave a log that shows no damage, and the next start would
// drop a recreated queue's messages as messages of no known queue. A start
// that finds the mark settles the orphans as the repair would have.
const repairPendingName = "repair-pending"

// markRepairPending reports whether an earlier repair start left the mark,
// and marks the directory (durably) when this start repairs.
func markRepairPending(o *Options) (resumed bool, err error) {
	name := filepath.Join(o.Dir, repairPendingName)
	if _, err := os.Stat(name); err == nil {
		return true, nil
	}
	if !o.WAL.Repair {
		return false, nil
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = wal.OSFS().SyncDir(o.Dir)
	}
	if err != nil {
		return false, fmt.Errorf("engine: mark the repair: %w", err)
	}
	return false, nil
}

// clearRepairPending removes the mark once the repair is settled.
func (d *durableStore) clearRepairPending() {
	name := filepath.Join(d.opts.Dir, repairPendingName)
	if _, err := os.Stat(name); err != nil {
		return
	}
	err := os.Remove(name)
	if err == nil {
		err = wal.OSFS().SyncDir(d.opts.Dir)
	}
	if err != nil {
		d.log.Warn("the repair mark could not be removed", "file", name, "err", err)
	}
}
