package chaos

// The faults of a cycle: each injects one fault and returns how to heal
// it. A cycle is: inject, let the workload run under the fault, heal, wait
// until the cluster has converged (every node up, healthy and caught up).
// One fault at a time: the cluster promises to survive the loss of a
// minority, not of a majority; but for the kill -9 of every node at once
// (killAll, in KillFaults only), which loses nothing acknowledged either.
//
// Invariants:
//  1. A fault's heal undoes everything its inject did (links healed, nodes
//     running with their normal flags).
//  2. Faults that pick "the leader" pick the node leading a shard that
//     one of the workload's queues lives on, as the nodes report it when
//     the fault is injected.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault is one kind of fault.
type Fault struct {
	Name   string
	Inject func(c *Cluster, shard int) (heal func() error, err error)
}

// leaderOr returns the leader of shard, or a random node when none is
// known right now.
func leaderOr(c *Cluster, shard int) int {
	if l := c.Leader(shard); l != 0 {
		return l
	}
	return 1 + rand.IntN(len(c.Nodes))
}

func restart(c *Cluster, i int) func() error { return func() error { return c.StartNode(i) } }

// CycleFaults returns the harness's faults, in the order cycles take them.
func CycleFaults() []Fault {
	return []Fault{
		killLeader,
		{"partition the leader from the majority (symmetric)", func(c *Cluster, shard int) (func() error, error) {
			c.Isolate(leaderOr(c, shard), true, true)
			return func() error { c.Heal(); return nil }, nil
		}},
		{"drop and delay packets on every link", func(c *Cluster, shard int) (func() error, error) {
			c.SetAll(Faults{Loss: 0.2, Retransmit: 200 * time.Millisecond, Delay: 15 * time.Millisecond})
			return func() error { c.Heal(); return nil }, nil
		}},
		{"kill -9 a node, wipe its data directory, restart it", func(c *Cluster, shard int) (func() error, error) {
			i := 1 + rand.IntN(len(c.Nodes))
			c.Kill(i)
			if err := c.Wipe(i); err != nil {
				return nil, err
			}
			return func() error { return nil }, c.StartNode(i)
		}},
		{"partition: the leader hears nobody (one-way, incoming cut)", func(c *Cluster, shard int) (func() error, error) {
			c.Isolate(leaderOr(c, shard), false, true)
			return func() error { c.Heal(); return nil }, nil
		}},
		{"remove a follower from the cluster, wipe it, add it back (--join)", func(c *Cluster, shard int) (func() error, error) {
			l := c.Leader(shard)
			i := 1 + rand.IntN(len(c.Nodes))
			for k := 0; i == l && k < 10; k++ {
				i = 1 + rand.IntN(len(c.Nodes))
			}
			s := i%len(c.Nodes) + 1 // a survivor asks for both changes
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := c.Client(s).Member(ctx, i, ""); err != nil {
				return nil, err
			}
			c.Kill(i)
			if err := c.Wipe(i); err != nil {
				return nil, err
			}
			c.SetExtraArgs(i, []string{"--join"})
			if err := c.StartNode(i); err != nil {
				return nil, err
			}
			if err := c.Client(s).Member(ctx, i, c.Nodes[i-1].Raft); err != nil {
				return nil, err
			}
			return func() error { c.SetExtraArgs(i, nil); return nil }, nil
		}},
		{"stop the leader gracefully (SIGTERM) under load, restart it", func(c *Cluster, shard int) (func() error, error) {
			l := leaderOr(c, shard)
			if err := c.Stop(l, 30*time.Second); err != nil {
				return nil, err
			}
			return restart(c, l), nil
		}},
		{"clock skew of ±2 s on one node (the leader)", func(c *Cluster, shard int) (func() error, error) {
			l := leaderOr(c, shard)
			off := "2s"
			if rand.IntN(2) == 0 {
				off = "-2s"
			}
			c.Kill(l)
			c.SetExtraArgs(l, []string{"--clock-offset", off})
			if err := c.StartNode(l); err != nil {
				return nil, err
			}
			return func() error {
				c.Kill(l)
				c.SetExtraArgs(l, nil)
				return c.StartNode(l)
			}, nil
		}},
		{"partition: nobody hears the leader (one-way, outgoing cut)", func(c *Cluster, shard int) (func() error, error) {
			c.Isolate(leaderOr(c, shard), true, false)
			return func() error { c.Heal(); return nil }, nil
		}},
		killFollower,
		{"crash loop: kill -9 the leader three times within 0.4 s of its starts", func(c *Cluster, shard int) (func() error, error) {
			// The windows of a start (recovery, the rejoin question, the
			// first Readys): a node stopped right after its first start
			// once came back with no members.
			l := leaderOr(c, shard)
			c.Kill(l)
			for range 3 {
				if err := c.StartNode(l); err != nil {
					return nil, err
				}
				time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
				c.Kill(l)
			}
			return restart(c, l), nil
		}},
		{"partition the leader, heal as soon as another node leads", func(c *Cluster, shard int) (func() error, error) {
			// The old leader has not heard of the new term yet at the
			// heal: for a moment two nodes take receives for the shard
			// (docs/chaos.md, "A safety gap these runs found, and its fix").
			l := leaderOr(c, shard)
			c.Isolate(l, true, true)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && leaderBut(c, shard, l) == 0; {
				time.Sleep(5 * time.Millisecond)
			}
			c.Heal()
			return func() error { return nil }, nil
		}},
	}
}

// The kills of a node, in CycleFaults and KillFaults.
var (
	killLeader = Fault{"kill -9 the leader", func(c *Cluster, shard int) (func() error, error) {
		l := leaderOr(c, shard)
		c.Kill(l)
		return restart(c, l), nil
	}}
	killFollower = Fault{"kill -9 a follower", func(c *Cluster, shard int) (func() error, error) {
		l := c.Leader(shard)
		i := 1 + rand.IntN(len(c.Nodes))
		for k := 0; i == l && k < 10; k++ {
			i = 1 + rand.IntN(len(c.Nodes))
		}
		c.Kill(i)
		return restart(c, i), nil
	}}
	// killAll kills every node at one instant (KillAll) under the load and
	// restarts them all at the heal. The one fault of a majority that the
	// cluster promises to survive without losing anything acknowledged, in
	// any --sync mode (docs/operations.md, "What survives what"): a member
	// acknowledges an entry or a vote only once its log's files hold it,
	// and a killed process's writes stay with the operating system.
	killAll = Fault{"kill -9 every node at once, restart them all", func(c *Cluster, shard int) (func() error, error) {
		ids := c.KillAll()
		return func() error {
			var errs []error
			for _, i := range ids {
				errs = append(errs, c.StartNode(i))
			}
			return errors.Join(errs...)
		}, nil
	}}
)

// KillFaults returns the kills, in the order cycles take them: of a
// shard's leader, of a follower, of every node at once. They are the
// faults a node's --sync mode matters for (TestChaosSyncInterval).
func KillFaults() []Fault { return []Fault{killLeader, killFollower, killAll} }

// leaderBut returns a node other than old that leads shard, or 0.
func leaderBut(c *Cluster, shard, old int) int {
	for _, n := range c.Nodes {
		if n.ID == old || !c.Up(n.ID) {
			continue
		}
		if st, err := c.Status(n.ID); err == nil && shard < len(st.Shards) {
			if s := st.Shards[shard]; s.Ready && s.Leader == uint64(n.ID) {
				return n.ID
			}
		}
	}
	return 0
}

// Cycle runs one fault cycle: inject fault f on shard, wait hold, heal,
// and wait up to converge for the cluster to converge.
func Cycle(c *Cluster, f Fault, shard int, hold, converge time.Duration) error {
	heal, err := f.Inject(c, shard)
	if err != nil {
		return fmt.Errorf("%s: inject: %w", f.Name, err)
	}
	time.Sleep(hold)
	if err := heal(); err != nil {
		return fmt.Errorf("%s: heal: %w", f.Name, err)
	}
	if err := c.WaitHealthy(converge); err != nil {
		return fmt.Errorf("%s: after healing: %w", f.Name, err)
	}
	return nil
}
