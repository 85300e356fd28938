package engine

// Repair, continued (repair.go): queues whose own records were lost.
//
// A queue record lost before the checkpoint position costs nothing: the
// index holds its effect. A queue record of the log tail (after kill -9)
// that a repair skipped is settled from what survived, so that every valid
// record after the damage is kept:
//
//   - queue-create: if a later queue-config record of the same id survives,
//     it carries the whole queue value (name, stripes, config): the queue is
//     as that record says. Otherwise, if messages of the id survive (their
//     send, state or relocate records are intact), the queue is recreated as
//     "recovered-queue-<id>" with the default config and the broker's stripe
//     count (more if a message names a higher stripe); a create record is
//     appended and synced before anything is served, so a restart keeps it.
//     A replicated log (replica.go) never gets a record of one node's own:
//     there the messages are dropped and reported as lost instead. A queue
//     that had neither is gone (nothing to keep) and the report says so.
//   - queue-config: the queue keeps the value it had before (its create
//     record or an earlier config record).
//   - queue-delete: the queue and its messages stay. The queue id is read
//     from the damaged record and is unverified (the damaged byte may be in
//     it, and ids are small consecutive numbers), so deleting on its word
//     could delete the wrong queue; keeping is what can be undone: the
//     report names the queue and every message it holds so that an operator
//     can delete it again.
//
// Every case is logged at Warn level and listed in the report's "queues",
// with the message ids each affected queue holds after the start.
//
// A record whose header is destroyed is not known to have been a queue
// record; the recreation above needs no header (it goes by the surviving
// messages), the config and delete cases do.

import (
	"fmt"
	"slices"
)

// Outcomes of a lost queue record (reportedQueue.Outcome).
const (
	outcomeInIndex     = "in-index"        // before the checkpoint: the index holds its effect
	outcomeRecreated   = "recreated"       // create lost, messages survive: placeholder name, default config
	outcomeFromConfig  = "from-config"     // create lost: a later config record holds the whole queue value
	outcomePrevConfig  = "previous-config" // config lost: the queue keeps its earlier config
	outcomeKeptLive    = "kept"            // delete lost: the queue and its messages stay
	outcomeGone        = "gone"            // nothing that survived refers to the queue
	outcomeMessageLost = "messages-lost"   // create lost in a replicated log: its messages are dropped
	outcomeIDDamaged   = "id-damaged"      // config or delete lost, and the queue it changed cannot be told
)

// reportedQueue is a queue a repair touched (repairReport.Queues).
type reportedQueue struct {
	QueueID   uint64   `json:"queue_id"`
	Name      string   `json:"name,omitempty"`       // the name it has now (empty if gone)
	Record    string   `json:"record"`               // the lost record's type
	Pos       uint64   `json:"pos,omitempty"`        // its position, when its header was readable
	NameFound string   `json:"name_found,omitempty"` // the name the damaged record reads (unverified)
	Outcome   string   `json:"outcome"`
	Reason    string   `json:"reason"`
	Messages  []string `json:"messages,omitempty"` // the ids of the messages it holds after the start
}

// recoveredQueueName is the name given to a queue recreated without one.
func recoveredQueueName(id uint64, taken func(string) bool) string {
	name := fmt.Sprintf("recovered-queue-%d", id)
	for i := 2; taken(name); i++ {
		name = fmt.Sprintf("recovered-queue-%d-%d", id, i)
	}
	return name
}

// settleQueues applies the rules above. vals holds the index's queues
// overridden by the tail's (fold f), cp is the checkpoint position and
// idxMax the highest queue id created before it (the index's high-water
// mark): a queue of an id at or below it was created before the checkpoint,
// so if it is not in vals it was deleted (a send that raced with the
// deletion can follow the delete record in the log) and is not recreated:
// rebuild skips such messages as before. It adds recreated queues to vals and returns them (they
// need a create record: rebuild.finish) and the highest queue id the tail's
// messages name (queue ids are never reused).
func (d *durableStore) settleQueues(rs *repairState, f *fold, vals map[uint64]queueVal, cp, idxMax uint64, nowMs int64) (create []queueVal, maxID uint64) {
	// Messages of the tail whose queue is unknown.
	orphans := map[uint64][]uint64{} // queue id -> seqs
	maxStripe := map[uint64]int{}
	for i := range f.nents {
		m := f.ent(i)
		maxID = max(maxID, m.k.qid)
		if m.dead || m.gone {
			continue
		}
		if _, ok := vals[m.k.qid]; ok || m.k.qid <= idxMax {
			continue
		}
		orphans[m.k.qid] = append(orphans[m.k.qid], m.k.seq)
		maxStripe[m.k.qid] = max(maxStripe[m.k.qid], int(m.snap[48]))
	}
	if !rs.skipped && !rs.resumed && len(rs.report.LostRecords) == 0 {
		return nil, maxID // no damage: orphans (if any) are rebuild's to log
	}
	watch := func(id uint64) {
		if rs.watch == nil {
			rs.watch = map[uint64][]int{}
		}
		rs.watch[id] = append(rs.watch[id], len(rs.report.Queues)-1)
	}
	names := map[string]bool{}
	everGiven := max(idxMax, f.maxQueue, maxID) // no queue id above it was ever given
	for id, v := range vals {
		names[v.name] = true
		everGiven = max(everGiven, id)
	}
	ids := make([]uint64, 0, len(orphans))
	for id := range orphans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	settled := map[uint64]bool{}
	for _, id := range ids {
		if !rs.skipped && !rs.resumed {
			break // a cut tail takes every record after the damage: no orphan comes from it
		}
		settled[id] = true
		rs.changed = true
		seqs := orphans[id]
		slices.Sort(seqs)
		if d.repl != nil {
			rs.report.Queues = append(rs.report.Queues, reportedQueue{QueueID: id, Record: recordTypeName(recQueueCreate),
				Outcome: outcomeMessageLost, Reason: fmt.Sprintf("its create record was lost and a replicated log takes no record of one node's own: its %d messages are dropped", len(seqs))})
			for _, seq := range seqs {
				rs.report.LostMessages = append(rs.report.LostMessages, reportedLoss{MessageID: makeMessageID(id, seq).String(),
					QueueID: id, Reason: "its queue's create record was lost"})
			}
			continue
		}
		v := queueVal{id: id, stripes: max(d.b.opts.Stripes, maxStripe[id]+1), createMs: nowMs, modifyMs: nowMs,
			cfg: DefaultQueueConfig(), name: recoveredQueueName(id, func(n string) bool { return names[n] })}
		names[v.name] = true
		vals[id] = v
		create = append(create, v)
		why := fmt.Sprintf("its create record was lost and no later config record names it; %d of its messages survive: "+
			"recreated with a placeholder name and the default config", len(seqs))
		rq := reportedQueue{QueueID: id, Name: v.name, Record: recordTypeName(recQueueCreate), Outcome: outcomeRecreated}
		for _, r := range rs.report.LostRecords {
			if r.Type == rq.Record && r.QueueID == id {
				rq.Pos, rq.NameFound = r.Pos, r.NameFound
				if r.NameFound != "" {
					why += fmt.Sprintf("; the damaged record reads the name %q (unverified: the damage may be in it)", r.NameFound)
				}
			}
		}
		rq.Reason = why
		rs.report.Queues = append(rs.report.Queues, rq)
		watch(id)
	}
	// The queue records whose headers could be read.
	for _, r := range rs.report.LostRecords {
		var outcome, why string
		v, live := vals[r.QueueID]
		switch r.Type {
		case recordTypeName(recQueueCreate), recordTypeName(recQueueConfig), recordTypeName(recQueueDelete):
		default:
			continue
		}
		switch {
		case r.Pos < cp:
			outcome, why = outcomeInIndex, "the record was checkpointed before the damage: the index holds its effect"
		case settled[r.QueueID] && r.Type == recordTypeName(recQueueCreate):
			continue // reported above
		case r.Type == recordTypeName(recQueueCreate) && live:
			outcome, why = outcomeFromConfig, "a later queue-config record of the same id holds the whole queue value: the queue is as it says"
		case r.Type == recordTypeName(recQueueConfig) && live:
			outcome, why = outcomePrevConfig, "this change is lost: the queue keeps the configuration of its last surviving create or config record"
		case r.Type == recordTypeName(recQueueDelete) && live:
			outcome, why = outcomeKeptLive, "its delete record was lost (the id read from the damaged record is unverified): "+
				"the queue and its messages are kept; delete the queue again if it was deleted"
		case r.QueueID > everGiven && r.Type != recordTypeName(recQueueCreate):
			// No queue ever had the id read: the damage is in the id.
			// A single damaged byte leaves the others: a loaded queue
			// whose id differs in one byte only is probably the one.
			if c, ok := oneByteApart(r.QueueID, vals); ok {
				v, live = vals[c], true
				outcome, why = outcomeKeptLive, fmt.Sprintf("the record's queue id is damaged (%d was never given); queue %d differs from it in one byte "+
					"and is probably the one: ", r.QueueID, c)
				if r.Type == recordTypeName(recQueueConfig) {
					outcome, why = outcomePrevConfig, why+"it keeps its last surviving configuration"
				} else {
					why += "it is kept with its messages; delete it again if it was deleted"
				}
				r.QueueID = c
				break
			}
			outcome, why = outcomeIDDamaged, fmt.Sprintf("the record's queue id is damaged (%d was never given) and no one loaded queue is near it: "+
				"the queue it changed cannot be told (after a lost delete, a deleted queue may be live again: check the queue list)", r.QueueID)
		default:
			outcome, why = outcomeGone, "nothing that survived refers to this queue id: no queue of it is loaded"
		}
		rs.changed = true
		rq := reportedQueue{QueueID: r.QueueID, Record: r.Type, Pos: r.Pos, NameFound: r.NameFound, Outcome: outcome, Reason: why}
		if live {
			rq.Name = v.name
		}
		rs.report.Queues = append(rs.report.Queues, rq)
		if live && outcome != outcomeInIndex {
			watch(r.QueueID)
		}
	}
	return create, maxID
}

// oneByteApart returns the one queue of vals whose id differs from id in
// exactly one byte, if there is exactly one.
func oneByteApart(id uint64, vals map[uint64]queueVal) (uint64, bool) {
	var found uint64
	n := 0
	for c := range vals {
		diff, bytes := c^id, 0
		for ; diff != 0; diff >>= 8 {
			if diff&0xff != 0 {
				bytes++
			}
		}
		if bytes == 1 {
			found = c
			n++
		}
	}
	return found, n == 1
}
