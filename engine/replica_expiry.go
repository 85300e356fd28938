package engine

// Expiries a replica made and did not log.
//
// Every replica expires a message by its own timer at the deadline the
// leader's timestamps give (stripe.go expireLocked), but only a leader logs
// the expiry: a follower's expire record is refused (replStore.append), and
// the leader's record reaches it in the log. Two cases leave an expiry that
// nobody logs: the leader stops leading before it logs one (a kill, a
// partition, a hand-over), and a leader handing its lead over (Yield) must
// not propose at all, or its broker never settles while messages keep
// ageing out (engine/cluster/transfer.go). Unless the next leader logs it,
// such a message stays live in every replica's index and log, and a
// replica's restart expires it again and logs nothing either.
//
// Invariants:
//  1. A replica that expires a message without logging it (a follower, a
//     yielding leader, or its recovery at start-up, whose expire records
//     are void: replica.go invariant 1) remembers the expire record
//     (unlogged), and forgets it once an entry naming that message is
//     applied here (the leader logged the expiry, or still held the
//     message and will). A snapshot is installed into a new broker
//     (engine/cluster/snapshot.go), which remembers none: the imported
//     state decides, and its timers expire what is due.
//  2. A replica that starts to lead (SetLeader(true)), or a yielding leader
//     that leads on (Yield(false)), proposes every expiry it remembers
//     before it answers; proposing one twice is harmless (applying an
//     expiry of a message no longer in its slot changes nothing: apply.go).
//  3. A yielding leader's expiries are made in its live state, as a
//     follower's are, and are neither proposed nor counted by Settled; they
//     never make the broker diverge. Nor does a leader's expiry-only
//     proposal that fails at a step-down: it is remembered, as a
//     follower's expiry is (its broker needs no rebuild for it). Its
//     records stay void here; should Raft commit its entry after all,
//     this replica's checkpoints skip them, and the message stays in its
//     index until a restart finds it expired (as a follower's would).
//  4. At most maxUnlogged expiries are remembered (memory stays bounded
//     when a follower lags a mass expiry); one left out stays in the
//     index until a restart of this replica finds it expired again.
//
// Owner: replStore.mu guards unlogged.

// maxUnlogged bounds the expiries a replica remembers (invariant 4): 80
// bytes of key and record each, plus the map's own.
const maxUnlogged = 1 << 16

// unloggedPiece is how many remembered expiries one proposal carries.
const unloggedPiece = 256

// rememberLocked keeps the expire records among recs that this replica made
// and did not log (invariant 1). The caller holds r.mu.
func (r *replStore) rememberLocked(recs []logRec) {
	for i := range recs {
		if recs[i].typ == recExpire {
			r.rememberSnapLocked(recs[i].head)
		}
	}
}

// rememberSnapLocked keeps one expire record's snapshot. The caller holds
// r.mu.
func (r *replStore) rememberSnapLocked(head []byte) {
	if len(head) != snapLen {
		return
	}
	s, err := decodeSnap(head)
	if err != nil {
		return
	}
	k := msgKey{s.qid, s.seq}
	if _, ok := r.unlogged[k]; ok {
		return
	}
	if len(r.unlogged) >= maxUnlogged {
		r.unloggedDropped++
		return
	}
	if r.unlogged == nil {
		r.unlogged = map[msgKey][snapLen]byte{}
	}
	r.unlogged[k] = [snapLen]byte(head)
}

// loggedLocked forgets the remembered expiries of the messages an applied
// entry names (invariant 1). The caller holds r.mu.
func (r *replStore) loggedLocked(names []msgKey) {
	if len(r.unlogged) == 0 {
		return
	}
	for _, k := range names {
		delete(r.unlogged, k)
	}
	if len(r.unlogged) == 0 {
		r.unlogged = nil // a map that grew for a mass expiry gives its memory back
	}
}

// takeUnloggedLocked returns the remembered expiries as records and forgets
// them. The caller holds r.mu.
func (r *replStore) takeUnloggedLocked() []logRec {
	if len(r.unlogged) == 0 {
		return nil
	}
	recs := make([]logRec, 0, len(r.unlogged))
	for _, rec := range r.unlogged {
		recs = append(recs, logRec{typ: recExpire, head: rec[:]})
	}
	r.unlogged = nil
	return recs
}

// logUnlogged proposes expiries taken by takeUnloggedLocked (invariant 2),
// in pieces. A piece its append refuses is remembered again: refused
// because this replica no longer leads (append remembers it then), or
// for the storage (then here), to be proposed by the next leader or at
// this one's next start to lead. It takes r.mu: never call it with mu held.
func (r *replStore) logUnlogged(recs []logRec) {
	for len(recs) > 0 {
		n := min(len(recs), unloggedPiece)
		piece := recs[:n]
		recs = recs[n:]
		if err := r.append(piece); err != nil {
			r.mu.Lock()
			r.rememberLocked(piece)
			r.rememberLocked(recs)
			r.mu.Unlock()
			return
		}
	}
}

// yieldExpiryLocked refuses a yielding leader's expiries as a follower's
// are refused (invariant 3): made in the live state, remembered, logged by
// the next leader or by this one if it leads on. The caller holds r.mu.
func (r *replStore) yieldExpiryLocked(recs []logRec) error {
	r.rememberLocked(recs)
	for i := range recs {
		recs[i].pos, recs[i].size = 0, 0
	}
	return ErrNotLeader
}

// expiryCopy returns the snapshots of recs, one after another, if they are
// expire records only (an expiry-only proposal, kept until it commits:
// invariant 3), else nil. At most maxUnlogged are kept: no more could be
// remembered.
func expiryCopy(recs []logRec) []byte {
	if !allExpires(recs) {
		return nil
	}
	cp := make([]byte, 0, min(len(recs), maxUnlogged)*snapLen)
	for i := range recs[:min(len(recs), maxUnlogged)] {
		if len(recs[i].head) == snapLen {
			cp = append(cp, recs[i].head...)
		}
	}
	return cp
}

// failedExpiryLocked remembers the records of a failed expiry-only
// proposal and reports whether p was one (invariant 3). The caller holds
// r.mu.
func (r *replStore) failedExpiryLocked(p *pendingProp) bool {
	if p.expiries == nil {
		return false
	}
	for b := p.expiries; len(b) >= snapLen; b = b[snapLen:] {
		r.rememberSnapLocked(b[:snapLen])
	}
	return true
}

// allExpires reports whether recs are expire records only.
func allExpires(recs []logRec) bool {
	for i := range recs {
		if recs[i].typ != recExpire {
			return false
		}
	}
	return len(recs) > 0
}
