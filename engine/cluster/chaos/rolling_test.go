package chaos

// Operator paths with real smqd processes under load: rolling restarts
// (SIGTERM and kill -9), replacing members with smqctl cluster add and rm
// (add first, remove first, a stale --cluster-peers, a dead or blackholed
// member), each node's data directory emptied in turn, and a new cluster
// with one node started late. The workload records every operation; at
// the end the queues are drained and the checker counts what was lost
// (finish).
//
// They run with -tags long only (make test-long; about 6 minutes in all
// with -race on 2 cores):
//
//	go test -race -tags long -run TestRolling -v ./engine/cluster/chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rollingRun skips t unless -tags long.
func rollingRun(t *testing.T) {
	t.Helper()
	if !chaosLong {
		t.Skip("operator paths on real processes: -tags long (make test-long)")
	}
}

// startRolling starts a cluster of nodes and a workload on it, waits until
// the load has data in flight (moreSends), and returns the stop of the
// load.
func startRolling(t *testing.T, nodes, shards int) (*Cluster, *Workload, func()) {
	t.Helper()
	c := startCluster(t, nodes, shards)
	w := newWorkload(c, queuesOnShards(shards))
	stop := runLoad(t, w, time.Minute)
	moreSends(t, w)
	return c, w, stop
}

// moreSends waits until the load has had loadSends more sends
// acknowledged than so far (about a second of it with -race on 2 cores),
// so that each change meets data in flight; it fails t when the load
// stalls.
func moreSends(t *testing.T, w *Workload) {
	t.Helper()
	const loadSends, timeout = 100, time.Minute
	acked := func() int {
		n := 0
		for _, op := range w.H.Ops() {
			if op.Kind == OpSend && op.Outcome == Ok && op.Process >= 0 {
				n++
			}
		}
		return n
	}
	want := acked() + loadSends
	for deadline := time.Now().Add(timeout); acked() < want; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the load stalled: %d sends acknowledged in %v, not %d", acked()-want+loadSends, timeout, loadSends)
		}
	}
}

// without returns ids without x.
func without(ids []int, x int) []int {
	return slices.DeleteFunc(slices.Clone(ids), func(i int) bool { return i == x })
}

// running returns the nodes of ids whose process runs.
func running(c *Cluster, ids []int) []int {
	return slices.DeleteFunc(slices.Clone(ids), func(i int) bool { return !c.Up(i) })
}

// waitHealthz waits until node i's /healthz answers 200.
func waitHealthz(c *Cluster, i int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ok := c.Client(i).Healthy(ctx)
		cancel()
		if ok {
			return nil
		}
	}
	return fmt.Errorf("node %d: /healthz not 200 after %v", i, timeout)
}

// waitVoting waits until node i's GET /cluster says it holds no vote.
func waitVoting(c *Cluster, i int, timeout time.Duration) error {
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, e := c.Status(i)
		if e == nil && !st.VoteHeld {
			return nil
		}
		err = e
	}
	return fmt.Errorf("node %d still holds its vote after %v (last error %v)", i, timeout, err)
}

// dumpStatus logs each node's view of the cluster.
func dumpStatus(t *testing.T, c *Cluster, ids []int) {
	t.Helper()
	for _, id := range ids {
		if !c.Up(id) {
			t.Logf("node %d: down", id)
			continue
		}
		st, err := c.Status(id)
		if err != nil {
			t.Logf("node %d: %v", id, err)
			continue
		}
		var b strings.Builder
		for _, s := range st.Shards {
			fmt.Fprintf(&b, " [shard %d %s leader %d term %d commit %d voters %v]", s.Shard, s.Role, s.Leader, s.Term, s.Commit, s.Voters)
		}
		t.Logf("node %d: healthy %v, vote held %v, problem %q;%s", id, st.Healthy, st.VoteHeld, st.Problem, b.String())
	}
}

// waitConverged is c.WaitConverged, failing t (with every node's view)
// when it does not converge.
func waitConverged(t *testing.T, c *Cluster, live, voters []int, timeout time.Duration, after string) {
	t.Helper()
	start := time.Now()
	if err := c.WaitConverged(live, voters, timeout); err != nil {
		dumpStatus(t, c, voters)
		t.Fatalf("after %s: %v", after, err)
	}
	t.Logf("converged over %v %v after %s", live, time.Since(start).Round(time.Millisecond), after)
}

// probes numbers the sends of waitServing.
var probes atomic.Int64

// waitServing waits until a node of live leads each shard and a send
// through each node of live to each queue succeeds (recorded in the
// workload's history).
func waitServing(c *Cluster, w *Workload, live []int, timeout time.Duration) error {
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		err = nil
		for sh := 0; sh < c.cfg.Shards && err == nil; sh++ {
			if l := c.Leader(sh); !slices.Contains(live, l) {
				err = fmt.Errorf("shard %d: no leader among %v", sh, live)
			}
		}
		for _, o := range live {
			for _, q := range w.Queues {
				if err != nil {
					break
				}
				op := w.H.Invoke(Op{Process: -2, Kind: OpSend, Node: o, Queue: q, Body: fmt.Sprintf("probe-%d", probes.Add(1))})
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				id, e := c.Client(o).Send(ctx, q, op.Body)
				cancel()
				w.H.Done(op, e, func(x *Op) { x.MessageID = id })
				if e != nil {
					err = fmt.Errorf("send through node %d to %s: %w", o, q, e)
				}
			}
		}
		if err == nil {
			return nil
		}
	}
	return err
}

// killEach kills each member in turn (kill -9), waits until the others
// serve, and starts it again.
func killEach(t *testing.T, c *Cluster, w *Workload, members []int) {
	t.Helper()
	for _, k := range members {
		c.Kill(k)
		start := time.Now()
		if err := waitServing(c, w, without(members, k), time.Minute); err != nil {
			dumpStatus(t, c, members)
			t.Errorf("after the kill -9 of node %d: %v", k, err)
		} else {
			t.Logf("kill -9 of node %d: the others serve after %v", k, time.Since(start).Round(time.Millisecond))
		}
		if err := c.StartNode(k); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, c, members, members, 90*time.Second, fmt.Sprintf("node %d's restart", k))
		moreSends(t, w)
	}
}

// finishRolling stops the load and checks the history (finish).
func finishRolling(t *testing.T, c *Cluster, w *Workload, stop func()) {
	t.Helper()
	stop()
	r := finish(t, c, w)
	t.Logf("%s: %d acknowledged sends, %d lost, %d duplicate deliveries", t.Name(), r.SendsOk, len(r.Lost), r.Duplicates)
}

// ---- rolling restarts ----

// TestRollingRestartSIGTERM restarts each node of 3 in turn, three rounds,
// with SIGTERM (rolling); the clients of the other nodes see no error
// from a stop (DuringStops).
func TestRollingRestartSIGTERM(t *testing.T) { rollingRun(t); rolling(t, 3, false) }

// TestRollingRestartKill: the same with kill -9.
func TestRollingRestartKill(t *testing.T) { rollingRun(t); rolling(t, 3, true) }

// TestRollingRestartSIGTERMFive and TestRollingRestartKillFive: the same
// with 5 nodes.
func TestRollingRestartSIGTERMFive(t *testing.T) { rollingRun(t); rolling(t, 5, false) }
func TestRollingRestartKillFive(t *testing.T)    { rollingRun(t); rolling(t, 5, true) }

// rolling restarts each of nodes in turn, three rounds, with SIGTERM or
// kill -9, each one once the one before says /healthz 200 and the load
// has had more sends acknowledged (moreSends).
func rolling(t *testing.T, nodes int, kill bool) {
	c, w, stop := startRolling(t, nodes, 3)
	members := c.Members()
	for round := 1; round <= 3 && !t.Failed(); round++ {
		for _, i := range members {
			start := time.Now()
			if kill {
				c.Kill(i)
			} else if err := c.Stop(i, 30*time.Second); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
			if err := c.StartNode(i); err != nil {
				t.Fatal(err)
			}
			if err := waitHealthz(c, i, time.Minute); err != nil {
				dumpStatus(t, c, members)
				t.Fatalf("round %d, after its restart: %v", round, err)
			}
			t.Logf("round %d: node %d restarted, /healthz 200 %v after its stop began", round, i, time.Since(start).Round(time.Millisecond))
			moreSends(t, w)
		}
	}
	finishRolling(t, c, w, stop)
	if !kill {
		bad, checked := DuringStops(w.H.Ops(), c.Stops())
		t.Logf("%d graceful stops: %d operations through the other nodes meanwhile, %d of them failed", len(c.Stops()), checked, len(bad))
		for _, b := range bad {
			t.Errorf("a graceful stop failed another node's client: %s", b)
		}
	}
}

// ---- replacing members ----

// smqctl runs smqctl cluster add or rm through node via, again while it
// fails, for at most two minutes: an attempt that failed may have made the
// change all the same, and a later one then finds it made ("is a member
// already", "is not a member"), which is success.
func smqctl(t *testing.T, c *Cluster, via int, args ...string) {
	t.Helper()
	full := append([]string{"--endpoint", "http://" + c.Nodes[via-1].API, "--credentials-file", c.creds}, args...)
	var out []byte
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		retry := err != nil
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err = exec.CommandContext(ctx, command(t, "smqctl"), full...).CombinedOutput()
		cancel()
		t.Logf("smqctl %s (through node %d): %s (err %v)", strings.Join(args, " "), via, strings.TrimSpace(string(out)), err)
		made := retry && (strings.Contains(string(out), "is a member already") || strings.Contains(string(out), "is not a member"))
		if err == nil || made {
			return
		}
	}
	t.Fatalf("smqctl %s: %v: %s", strings.Join(args, " "), err, out)
}

// replaceOne replaces member out by a new node started with --join,
// through member via: add then rm, or rm then add (removeFirst, as
// docs/operations.md advises for 3 nodes). The new node's --cluster-peers
// names the members as the operator knows them: out too while it is one,
// and with stalePeers after its rm as well. cut lists the nodes whose
// machines dropped off the network: the new node's links to them are cut
// too. It returns the members after.
func replaceOne(t *testing.T, c *Cluster, w *Workload, members []int, out, via int, removeFirst, stalePeers bool, cut []int) []int {
	t.Helper()
	rest := without(members, out)
	remove := func(forget bool) {
		// A load balancer stops sending to the node first.
		w.SetNodes(running(c, without(c.Members(), out)))
		smqctl(t, c, via, "cluster", "rm", fmt.Sprint(out))
		if err := c.Stop(out, 30*time.Second); err != nil {
			t.Error(err)
		}
		if forget {
			c.Forget(out)
		}
	}
	voters := members
	if removeFirst {
		remove(!stalePeers)
		waitConverged(t, c, running(c, rest), rest, 2*time.Minute, fmt.Sprintf("the rm of node %d", out))
		voters = rest
	}
	n, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range cut {
		c.Isolate(d, true, true)
	}
	c.SetExtraArgs(n.ID, []string{"--join"})
	if err := c.StartNode(n.ID); err != nil {
		t.Fatal(err)
	}
	if removeFirst {
		c.Forget(out) // later starts' --cluster-peers leave it out (the new node's named it with stalePeers)
	}
	// smqctl cluster add asks the new node first: it must answer.
	if err := waitStatus(c, n.ID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	smqctl(t, c, via, "cluster", "add", fmt.Sprint(n.ID), n.Raft)
	voters = append(slices.Clone(voters), n.ID)
	waitConverged(t, c, running(c, voters), voters, 2*time.Minute, fmt.Sprintf("the add of node %d", n.ID))
	if err := waitVoting(c, n.ID, time.Minute); err != nil {
		dumpStatus(t, c, voters)
		t.Fatal(err)
	}
	w.SetNodes(running(c, voters))
	if !removeFirst {
		remove(true)
	}
	rest = without(voters, out)
	waitConverged(t, c, rest, rest, 2*time.Minute, fmt.Sprintf("node %d replaced by node %d", out, n.ID))
	if st, err := c.Status(n.ID); err != nil || st.VoteHeld {
		t.Errorf("node %d after the replacement: vote held %v (err %v)", n.ID, st.VoteHeld, err)
	}
	return rest
}

// waitStatus waits until node i answers GET /cluster.
func waitStatus(c *Cluster, i int, timeout time.Duration) error {
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err = c.Status(i); err == nil {
			return nil
		}
	}
	return fmt.Errorf("node %d: GET /cluster: %w", i, err)
}

// TestRollingReplaceMembers replaces node 1 and then node 2 of 3 with new
// nodes (add, then rm), then kills each member in turn.
func TestRollingReplaceMembers(t *testing.T) { rollingRun(t); replaceMembers(t, false, false) }

// TestRollingReplaceMembersRemoveFirst: rm before add (docs: "Remove
// before you add when you replace a machine in a cluster of 3").
func TestRollingReplaceMembersRemoveFirst(t *testing.T) {
	rollingRun(t)
	replaceMembers(t, true, false)
}

// TestRollingReplaceMembersRemoveFirstStalePeers: the same, the new
// node's --cluster-peers still naming the removed member.
func TestRollingReplaceMembersRemoveFirstStalePeers(t *testing.T) {
	rollingRun(t)
	replaceMembers(t, true, true)
}

func replaceMembers(t *testing.T, removeFirst, stalePeers bool) {
	c, w, stop := startRolling(t, 3, 3)
	members := replaceOne(t, c, w, c.Members(), 1, 2, removeFirst, stalePeers, nil)
	members = replaceOne(t, c, w, members, 2, 3, removeFirst, stalePeers, nil)
	killEach(t, c, w, members)
	finishRolling(t, c, w, stop)
}

// TestRollingReplaceDeadMember: a member's machine dies (kill -9, never
// back); a new node is started with --join (its --cluster-peers as the
// operator had it, the dead member included) and added, then the dead
// member removed; then the same for a second member. 8 shards: the add
// changes some shards' preferred leader, and the balancer's move then
// left a shard with no leader for good while the dead member and the held
// new node were two of four voters (rolling audit, 2026-12-07; fixed in
// balance.go, electable).
func TestRollingReplaceDeadMember(t *testing.T) { rollingRun(t); replaceDead(t, false, false) }

// TestRollingReplaceDeadMemberRemoveFirst: the dead member removed first.
func TestRollingReplaceDeadMemberRemoveFirst(t *testing.T) {
	rollingRun(t)
	replaceDead(t, true, false)
}

// TestRollingReplaceBlackholedMember: as TestRollingReplaceDeadMember, the
// dead machine's address dropping packets (a powered-off host) instead of
// refusing connections; the new node's question then never ends early,
// and it still holds its vote when the add commits.
func TestRollingReplaceBlackholedMember(t *testing.T) {
	rollingRun(t)
	replaceDead(t, false, true)
}

func replaceDead(t *testing.T, removeFirst, blackhole bool) {
	const shards = 8
	c, w, stop := startRolling(t, 3, shards)
	members := c.Members()
	var cut []int
	for _, step := range [][2]int{{2, 1}, {1, 3}} {
		out, via := step[0], step[1]
		c.Kill(out)
		w.SetNodes(running(c, members))
		if blackhole {
			cut = append(cut, out)
			c.Isolate(out, true, true)
		}
		t.Logf("node %d died for good (blackholed %v)", out, blackhole)
		// The operator notices a while after the death: the survivors'
		// links to the dead member have failed by then.
		time.Sleep(2 * time.Second)
		members = replaceOne(t, c, w, members, out, via, removeFirst, true, cut)
	}
	killEach(t, c, w, members)
	finishRolling(t, c, w, stop)
}

// ---- a node's data directory emptied ----

// TestRollingEmptied empties each node's data directory in turn (stop,
// wipe, start: it holds its vote until it is replaced in every shard),
// then kills another node at once, so that the emptied node's vote is
// needed.
func TestRollingEmptied(t *testing.T)     { rollingRun(t); emptied(t, 3) }
func TestRollingEmptiedFive(t *testing.T) { rollingRun(t); emptied(t, 5) }

func emptied(t *testing.T, nodes int) {
	c, w, stop := startRolling(t, nodes, 3)
	members := c.Members()
	for _, i := range members[:3] {
		if err := c.Stop(i, 30*time.Second); err != nil {
			t.Error(err)
		}
		if err := c.Wipe(i); err != nil {
			t.Fatal(err)
		}
		if err := c.StartNode(i); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(waitVoting(c, i, time.Minute), waitHealthz(c, i, time.Minute)); err != nil {
			dumpStatus(t, c, members)
			t.Fatalf("emptied node %d: %v", i, err)
		}
		t.Logf("emptied node %d votes and is healthy", i)
		// Another node down at once: shard 0's leader, or the next node.
		j := i%nodes + 1
		if l := c.Leader(0); l != 0 && l != i {
			j = l
		}
		c.Kill(j)
		if err := waitServing(c, w, without(members, j), time.Minute); err != nil {
			dumpStatus(t, c, members)
			t.Errorf("after the kill -9 of node %d (node %d emptied): %v", j, i, err)
		}
		if err := c.StartNode(j); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, c, members, members, 2*time.Minute, fmt.Sprintf("node %d's restart", j))
		moreSends(t, w)
	}
	finishRolling(t, c, w, stop)
}

// ---- a new cluster with one node started late ----

// TestRollingLateStarter starts nodes 1 and 2 of a new cluster of 3 and
// the load on them, node 3 twenty seconds later; it must be let in, vote
// and catch up.
func TestRollingLateStarter(t *testing.T) {
	rollingRun(t)
	const shards = 3
	c := newCluster(t, 3, shards)
	start := time.Now()
	for _, i := range []int{1, 2} {
		if err := c.StartNode(i); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorkload(c, queuesOnShards(shards))
	w.SetNodes([]int{1, 2})
	stop := runLoad(t, w, time.Minute)
	time.Sleep(time.Until(start.Add(20 * time.Second))) // the scenario: node 3 starts 20 s after the others
	if err := c.StartNode(3); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(waitVoting(c, 3, time.Minute), c.WaitHealthy(2*time.Minute)); err != nil {
		dumpStatus(t, c, c.Members())
		t.Fatalf("late node 3: %v", err)
	}
	w.SetNodes(nil)
	killEach(t, c, w, c.Members())
	finishRolling(t, c, w, stop)
}
