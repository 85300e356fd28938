package cluster

// A node that may have lost its data holds its vote until it is replaced.
//
// Raft assumes a member never forgets what it acknowledged: the leaders
// counted it as holding entries. A wiped node (an empty directory started
// with the same --cluster-peers) bootstraps a fresh log and, as it was,
// voted at once for any candidate, before its question (rejoin.go) had
// it replaced. With the holder of the newest entries down and another
// member behind, its vote elected the member that lacked them, and the
// entries it had acknowledged were lost (the rejoin audit, 2026-12-06:
// 78 of 1,800 with real processes). A new cluster's node starts empty
// too, and must vote, even with a member never started; the two look
// alike from the node itself.
//
// Invariants:
//  1. A node holds its vote (grants no vote and no pre-vote, sends none of
//     its own: its pre-vote needs another's, so it never campaigns; drops
//     a leader's MsgTimeoutNow, and is handed no lead: givingLeadsAway;
//     /healthz says so) from its start when it has no history in any
//     shard (no entry, term or snapshot past a new cluster's bootstrap:
//     empty, a new cluster that never elected, a node started with --join
//     that has received nothing), or when <dir>/vote-held says an earlier
//     start held it and was not released. The mark is written, synced,
//     before its shards run, so a crash before its replacement (a node
//     that meanwhile received entries and so has history) holds the vote
//     again.
//  2. It votes again only when (a) a member answered that it was replaced
//     in every shard (removed and added back: from then on Raft counts it
//     as a new member, with an empty log, which is safe); or, without
//     --join, (b) neither it nor any member that answered has any history
//     and those answering, itself counted, are a majority of the members:
//     the cluster is new; or, with --join, (c) every member it asked answered
//     and none has it as a voter of any shard: it is a new member, not
//     added yet (`smqctl cluster add` needs it running, so it asks
//     before), and Raft adds it with an empty log. Otherwise it asks to be
//     replaced, whatever the acknowledgement tables say (an
//     acknowledgement may be known only to a member that is down, and a
//     leader elected since sends it a snapshot, after which its indexes no
//     longer show a loss): without --join as soon as a member's copy has
//     history, with --join as soon as a member has it as a voter. A node
//     whose replacement is refused (it was removed) holds its vote and
//     asks again every 10 s (added back while it runs, it is replaced
//     then); a member never replaces a node that is a voter of no shard
//     there (it would add it), and replaces it only in the shards it is a
//     voter of.
//  3. The mark goes (removed, directory synced) before the hold ends.
//  4. One exception: a held node grants its vote in a shard to a member
//     that answered that its process started its copy of that shard with
//     --wal-repair on a damaged log. The operator chose that copy as what
//     survives when every copy is damaged (docs/operations.md), and it
//     cannot lead without a vote from an emptied node; nor then can it
//     replace that node. Held without exception, the documented way out
//     stopped (TestClusterEveryCopyDamagedRepairOneEmptyTheOthers). It
//     ends once that copy led and every voter holds its log (repairTick);
//     shards/<S>/REPAIRED keeps it across that node's restarts until then
//     (damaged.go).
//  5. A node whose log may have lost what it acknowledged holds its vote
//     too: one whose previous run (or an earlier one not ended cleanly
//     since) used --sync interval or none, where a member acknowledges an
//     entry or a vote once written, before it is flushed (append.go,
//     invariant 4), and whose machine restarted since (the boot id
//     changed: a power loss, a kernel crash). <dir>/unsynced-run holds
//     the boot id; it is written, synced, at a start in those modes (or
//     while it exists), and removed only after a clean Close, which
//     flushed every log. A kill -9 leaves the boot id as it was: the
//     operating system kept what the process wrote, and nothing is held.
//     Where the boot id cannot be read, every start after a run that did
//     not end cleanly holds. The vote-held mark says why, so that the
//     reason outlives a crash before the replacement. Besides (a), such a
//     node votes again when it and the members that answered that they
//     lost power too and were not replaced since (rejoinPowerLost, in the
//     last minute) are a majority: a majority lost power, which the interval
//     mode's guarantee does not cover (docs/operations.md), and holding on
//     would stop every shard for good. A member answers so while it holds
//     its vote, and after it voted again by this rule until it knows a
//     leader of every shard (the cluster runs again: a member that loses
//     power later is replaced); a node that knows a leader of every shard
//     is replaced rather than counting a majority. The vote-held mark is
//     written before unsynced-run takes the new boot id, and a Close
//     removes unsynced-run only if every shard's broker was there and
//     closed without error (one restarting after a storage failure is
//     not). Until 2026-12-07 it voted at once,
//     with what it kept: its vote could elect a member that lacked
//     entries it had acknowledged while the leader that held them was
//     down.
//
// What is left: two emptied nodes of three, with the third down, look
// like a new cluster to each other (invariant 2b) and elect each other;
// so does an emptied node with a member that has held nothing since the
// cluster began. An emptied node added with --join whose --cluster-peers
// name only members that lag behind its own addition looks new (2c).
// More than a minority holding their votes at once (a node emptied while
// another, emptied before, was not replaced yet) leaves the shards with no
// leader to replace them: they wait for good, safe but stopped (the data
// is on the members that do not hold their votes). A new cluster's member
// started late is replaced too, and is told so once the leader applied
// its add-back: a leader that fails before the followers learn that it
// committed leaves them counting one voter less until they do (review Q:
// five members, one started late, two down: 2 runs of 4 stalled until a
// down member came back). Before the hold such a member was not replaced.
// A --join node added while a member is down (it cannot hear from every
// member, so it is still held when added) leaves, in a cluster of three,
// two voters of four that vote: leaders keep their leads (no hand-over is
// made then: balance.go electable, rolling audit), but a leader lost
// before the new node is replaced is not succeeded until the down member
// is back. Remove a dead member before adding its replacement.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
)

// ErrVoteHeld is Health's answer while this node holds its vote: it
// serves, but its shards count a voter that does not vote, and "healthy"
// let a rolling restart stop another member meanwhile (rejoin2 audit).
var ErrVoteHeld = errors.New("cluster: this node holds its vote until it is replaced (it started empty, or may have lost data): it serves requests, but its shards count it as a member that does not vote; do not stop another member until it votes")

// voteHeldFile marks a start that held the vote (invariant 1); its text
// says whether for a power loss (powerLostWhy, invariant 5).
const voteHeldFile = "vote-held"

// unsyncedRunFile marks a run whose log acknowledged what it had not
// flushed: it holds the machine's boot id (invariant 5).
const unsyncedRunFile = "unsynced-run"

// powerLostWhy, in the vote-held mark, says that the hold is invariant 5's.
const powerLostWhy = "its machine restarted under a run with --sync interval or none"

// holdVoteAtStart holds the vote if invariant 1 or 5 says so; it runs
// before the shards do.
func (n *Node) holdVoteAtStart() error {
	path := filepath.Join(n.cfg.Dir, voteHeldFile)
	mark, err := os.ReadFile(path)
	marked := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	runPath := filepath.Join(n.cfg.Dir, unsyncedRunFile)
	run, err := os.ReadFile(runPath)
	unsynced := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	boot := n.bootID()
	markedLost := marked && strings.Contains(string(mark), powerLostWhy)
	lost := markedLost || unsynced && (boot == "" || strings.TrimSpace(string(run)) != boot)
	if lost && !markedLost {
		// Before the run mark takes this boot's id: from then on only
		// this mark shows the power loss, and a start that stopped in
		// between (a kill, a failed write) held nothing at the next.
		if err := writeSynced(path, "this node holds its vote until it is replaced: "+powerLostWhy+" (engine/cluster/votehold.go, invariant 5)\n"); err != nil {
			return err
		}
	}
	if unsynced || !n.cfg.SyncAlways {
		// Before the shards run: what they acknowledge from now on is
		// covered by it.
		if err := writeSynced(runPath, boot+"\n"); err != nil {
			return err
		}
	}
	switch {
	case lost, marked:
	default:
		for _, s := range n.shards {
			if s.st.hasHistory() {
				return nil
			}
		}
		if err := writeSynced(path, "this node holds its vote until it is replaced or the cluster is found new (engine/cluster/votehold.go)\n"); err != nil {
			return err
		}
	}
	n.voteHeld.Store(true)
	if lost {
		n.lostPower.Store(true)
		n.log.Warn("this node's machine restarted while it ran with --sync interval or none (a power loss, a kernel crash): it may have lost entries it acknowledged, so it holds its vote until it is replaced", "boot_id", boot, "marked", marked)
		return nil
	}
	n.log.Info("this node holds its vote until the other members answer whether it lost data", "marked", marked)
	return nil
}

// bootID is the machine's boot id (Config.bootID, by default the Linux
// kernel's), or "" where it cannot be read.
func (n *Node) bootID() string {
	if n.cfg.bootID != nil {
		return n.cfg.bootID()
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// endUnsyncedRun removes the unsynced-run mark after a clean Close, every
// log flushed (invariant 5).
func (n *Node) endUnsyncedRun() {
	if err := os.Remove(filepath.Join(n.cfg.Dir, unsyncedRunFile)); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			n.log.Warn("unsynced-run mark not removed: the next start after a reboot holds its vote", "err", err)
		}
		return
	}
	if err := syncDir(n.cfg.Dir); err != nil {
		n.log.Warn("unsynced-run mark removal not synced", "err", err)
	}
}

// powerLostWindow is how long an answer that a member holds its vote for a
// power loss counts toward invariant 5's majority.
const powerLostWindow = time.Minute

// notePowerLost records whether member id answered that it lost power
// (rejoinPowerLost), and reports powerLostMajority.
func (n *Node) notePowerLost(id uint64, lost bool, members int) bool {
	n.ackMu.Lock()
	if n.powerLostPeers == nil {
		n.powerLostPeers = map[uint64]time.Time{}
	}
	if lost {
		n.powerLostPeers[id] = time.Now()
	} else {
		delete(n.powerLostPeers, id)
	}
	n.ackMu.Unlock()
	return n.powerLostMajority(members)
}

// powerLostMajority reports whether this node lost power, and it and the
// members that answered so in the last powerLostWindow are a majority of
// members (invariant 5). Not while it follows a leader in every shard:
// the members elect without it, and that leader replaces it (an answer
// counted here may be a minute old, its member replaced since).
func (n *Node) powerLostMajority(members int) bool {
	if !n.lostPower.Load() || n.everyShardLed() {
		return false
	}
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	count := 1
	for _, at := range n.powerLostPeers {
		if time.Since(at) < powerLostWindow {
			count++
		}
	}
	return 2*count > members
}

// everyShardLed reports whether this node knows a leader of every shard.
func (n *Node) everyShardLed() bool {
	for _, s := range n.shards {
		if s.lead.Load() == 0 {
			return false
		}
	}
	return true
}

// notePowerLostLed (every tick) ends the rejoinPowerLost answer of a node
// that voted again by invariant 5's majority once it knows a leader of
// every shard: the shards run again, and a member that loses power later
// is replaced by them. Answered for the rest of the run, the flag made
// such a member of a cluster that had lost power once count itself and
// this node a majority, and vote with what it kept (review revz).
func (n *Node) notePowerLostLed() {
	if !n.lostPower.Load() || n.voteHeld.Load() || n.powerLostLed.Load() || !n.everyShardLed() {
		return
	}
	n.powerLostLed.Store(true)
	n.log.Info("the shards have leaders again after a power loss: this node no longer answers that it lost power")
}

// releaseVote ends the hold (invariant 2), once.
func (n *Node) releaseVote(why string) {
	if !n.voteHeld.Load() {
		return
	}
	path := filepath.Join(n.cfg.Dir, voteHeldFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Held again at the next start, and replaced again: safe.
		n.log.Warn("vote-held mark not removed", "err", err)
	} else if err := syncDir(n.cfg.Dir); err != nil {
		n.log.Warn("vote-held mark removal not synced", "err", err)
	}
	if n.voteHeld.Swap(false) {
		n.log.Info("this node votes again", "why", why)
		if why == replacedWhy {
			n.lostPower.Store(false) // it holds what the others do now
		}
		n.sendState() // it may lead again
	}
}

// hasHistory reports whether the log holds anything past a new cluster's
// bootstrap: an entry or a term past 1, or a snapshot.
func (s *raftStorage) hasHistory() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snapIndex > 0 || s.hs.GetTerm() > 1 {
		return true
	}
	return len(s.terms) > 0 && s.terms[len(s.terms)-1] > 1
}

// rejoinFlags is, per shard, what a rejoin question asks of this node
// besides the acknowledgements: rejoinHistory when its copy has history,
// rejoinVoter when member from is a voter of the shard here,
// rejoinRepaired (invariant 4). To a question of another shard count (a
// wrong --shards on the asker) every shard's answer is the history and
// voter flags of all of them: taken as "no history", zeros made an
// emptied node find a new cluster and vote at once (review R,
// TestClusterWipedNodeWithAnotherShardCountHoldsItsVote).
func (n *Node) rejoinFlags(from uint64, shards int) []byte {
	own := make([]byte, len(n.shards))
	var all byte
	for i, s := range n.shards {
		if s.st.hasHistory() {
			own[i] |= rejoinHistory
		}
		if slices.Contains(s.st.votersNow(), from) {
			own[i] |= rejoinVoter
		}
		all |= own[i]
		if s.repaired.Load() {
			own[i] |= rejoinRepaired
		}
		if n.lostPower.Load() && !n.powerLostLed.Load() {
			own[i] |= rejoinPowerLost
		}
	}
	if shards == len(n.shards) {
		return own
	}
	out := make([]byte, shards)
	for i := range out {
		out[i] = all
	}
	return out
}

// repairTick (the shard's loop, every tick) ends invariant 4's exception
// once this repaired copy leads its shard and every voter holds its log
// up to where it was when first seen leading (repairUpTo): the procedure
// it is for is over. A repaired copy that fell behind later (its process
// still running) would otherwise collect held votes over a member that
// holds more.
func (s *shard) repairTick() {
	if !s.repaired.Load() || s.rn.BasicStatus().RaftState != raft.StateLeader {
		return
	}
	if s.repairUpTo == 0 {
		s.repairUpTo = s.st.lastIndexNow()
	}
	st := s.rn.Status()
	for _, id := range s.st.votersNow() {
		if pr, ok := st.Progress[id]; !ok || pr.Match < s.repairUpTo {
			return
		}
	}
	// A mark left (a failed removal) brings the exception back after a
	// restart, until this copy leads and is followed again.
	if err := os.Remove(filepath.Join(s.dir, repairedMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("REPAIRED mark not removed", "err", err)
	} else if err := syncDir(s.dir); err != nil {
		s.log.Warn("REPAIRED mark removal not synced", "err", err)
	}
	s.repaired.Store(false)
	s.log.Info("every member holds this repaired copy's log: held votes no longer go to it")
}
