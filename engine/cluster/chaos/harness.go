// Package chaos is smqd's fault harness: a cluster of real smqd processes
// on 127.0.0.1 with a fault proxy on every directed link between them
// (proxy.go), clients that record what they did and what they were told
// (history.go, workload.go), and a checker of the history as Jepsen's
// queue checkers do (checker.go). docs/chaos.md says how to run it and
// what it found.
package chaos

// The harness. Node i (1..n) listens for clients on its API address and
// for the other nodes on its Raft address; its --cluster-peers names its
// own Raft address for itself and, for every other node j, the address of
// the proxy of link i→j, which forwards to j's Raft address. smqd takes a
// peer's address from its own flags and keeps it (a member's view of
// another, learned from a configuration change, is not used where the flags
// give one), so every byte between two nodes goes through a proxy.
//
// Invariants:
//  1. A node's process is started only by StartNode and ended only by
//     Kill or KillAll (SIGKILL: no shutdown code runs), Stop (SIGTERM) or
//     Close; each waits until the process is gone, so a restarted node
//     never overlaps its predecessor.
//  2. A node keeps its ports and flags across restarts (a wiped node too):
//     the others' proxies keep pointing at it. Only its --cluster-peers
//     changes: it leaves out the members removed since (Forget).
//  3. Close kills every node and closes every proxy; nothing it started
//     outlives it (and on Linux a node dies with the test process).
//  4. Nodes only grows (AddNode, under mu): a node removed from the
//     cluster (Forget) keeps its slot, its ID and its proxies; it is only
//     left out of later --cluster-peers and of WaitHealthy.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/smqd/smqd/engine/cluster"
)

// Config describes a harness cluster.
type Config struct {
	Binary string // the smqd binary (Build makes one)
	Dir    string // working directory: data directories, logs, credentials
	Nodes  int    // 3 or 5
	Shards int    // --shards
	// Sync is every node's --sync: "always" (also when empty), "interval"
	// or "none". The interval of "interval" is smqd's default unless Args
	// give --sync-interval.
	Sync string
	// Args are extra flags for every node (e.g. --raft-tick).
	Args []string
	// Logf reports what the harness does (a test's t.Logf); nil: quiet.
	Logf func(format string, args ...any)
}

// Node is one smqd process of the harness.
type Node struct {
	ID      int
	API     string // client API address
	Raft    string // raft listen address
	DataDir string
	logPath string

	cmd  *exec.Cmd     // nil while down
	done chan struct{} // closed when cmd has exited
}

// Cluster is a running harness.
type Cluster struct {
	cfg      Config
	key      string
	AccessID string
	Secret   string
	creds    string
	Nodes    []*Node          // Nodes[i-1] is node i
	links    map[link]*Proxy  // the proxy of each directed link
	clients  map[int]*Client  // status clients, one per node
	mu       sync.Mutex       // guards the nodes' processes, and Nodes, links and clients while they grow
	extra    map[int][]string // extra flags of a node's next starts (clock offset)
	stops    []StopWindow     // guarded by mu: every graceful stop so far
	forgot   map[int]bool     // guarded by mu: nodes removed from the cluster (Forget)
	statusTO time.Duration
}

// StopWindow is a graceful stop (Stop): node Node was sent SIGTERM at
// Start and had exited by End.
type StopWindow struct {
	Node       int
	Start, End time.Time
}

// Stops returns the graceful stops so far.
func (c *Cluster) Stops() []StopWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.stops)
}

type link struct{ from, to int }

// Build compiles ./cmd/<name> (smqd, smqctl) into dir and returns the
// binary's path.
func Build(dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "github.com/smqd/smqd/cmd/"+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// New makes a cluster's nodes, their ports and the proxies between them,
// and starts none of them (StartAll, StartNode).
func New(cfg Config) (*Cluster, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	c := &Cluster{cfg: cfg, key: "chaos-cluster-key-" + hex.EncodeToString(secret), AccessID: "chaos",
		Secret: hex.EncodeToString(secret), links: map[link]*Proxy{}, clients: map[int]*Client{},
		extra: map[int][]string{}, forgot: map[int]bool{}, statusTO: 2 * time.Second}
	c.creds = filepath.Join(cfg.Dir, "credentials")
	if err := os.WriteFile(c.creds, []byte(c.AccessID+" "+c.Secret+"\n"), 0o600); err != nil {
		return nil, err
	}
	for range cfg.Nodes {
		if _, err := c.AddNode(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// AddNode makes node len(Nodes)+1, its ports and the proxies of its links
// with every other node (no faults on them), and does not start it.
func (c *Cluster) AddNode() (*Node, error) {
	api, err1 := FreeAddr()
	raft, err2 := FreeAddr()
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.Nodes) + 1
	n := &Node{ID: i, API: api, Raft: raft, DataDir: filepath.Join(c.cfg.Dir, fmt.Sprintf("node%d", i)),
		logPath: filepath.Join(c.cfg.Dir, fmt.Sprintf("node%d.log", i))}
	for _, o := range c.Nodes {
		out, err1 := NewProxy(o.Raft)
		in, err2 := NewProxy(n.Raft)
		if err := errors.Join(err1, err2); err != nil {
			for _, p := range []*Proxy{out, in} {
				if p != nil {
					p.Close()
				}
			}
			return nil, err
		}
		c.links[link{i, o.ID}], c.links[link{o.ID, i}] = out, in
	}
	c.Nodes = append(c.Nodes, n)
	c.clients[i] = NewClient(api, c.AccessID, c.Secret, c.statusTO)
	return n, nil
}

// StartAll starts every node and waits until the cluster is healthy.
func (c *Cluster) StartAll() error {
	for _, n := range c.Nodes {
		if err := c.StartNode(n.ID); err != nil {
			return err
		}
	}
	return c.WaitHealthy(60 * time.Second)
}

// Forget notes that node i was removed from the cluster: no node's later
// --cluster-peers names it, and WaitHealthy does not wait for it.
func (c *Cluster) Forget(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgot[i] = true
}

// Members lists the nodes not removed from the cluster (Forget).
func (c *Cluster) Members() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, n := range c.Nodes {
		if !c.forgot[n.ID] {
			out = append(out, n.ID)
		}
	}
	return out
}

// api is node i's client API address.
func (c *Cluster) api(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Nodes[i-1].API
}

// peers is node i's --cluster-peers: itself direct, the others not
// removed (Forget) through the proxies of i's outgoing links. The caller
// holds mu.
func (c *Cluster) peers(i int) string {
	var parts []string
	for _, n := range c.Nodes {
		if c.forgot[n.ID] && n.ID != i {
			continue
		}
		addr := n.Raft
		if n.ID != i {
			addr = c.links[link{i, n.ID}].Addr()
		}
		parts = append(parts, fmt.Sprintf("%d=%s", n.ID, addr))
	}
	return strings.Join(parts, ",")
}

// SetExtraArgs sets flags added to node i's next starts (nil: none).
func (c *Cluster) SetExtraArgs(i int, args []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.extra[i] = args
}

// StartNode starts node i's process (it must be down).
func (c *Cluster) StartNode(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i-1]
	if n.cmd != nil {
		return fmt.Errorf("node %d is running", i)
	}
	args := []string{"--node-id", fmt.Sprint(i), "--raft-listen", n.Raft, "--cluster-peers", c.peers(i),
		"--shards", fmt.Sprint(c.cfg.Shards), "--listen", n.API, "--data-dir", n.DataDir, "--sync", c.syncMode(),
		"--credentials-file", c.creds, "--console=false", "--log-format", "text"}
	args = append(args, c.cfg.Args...)
	args = append(args, c.extra[i]...)
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== chaos: start node %d at %s: %v\n", i, time.Now().Format(time.RFC3339Nano), args)
	cmd := exec.Command(c.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = cleanEnv("SMQD_CLUSTER_KEY=" + c.key)
	orphanProof(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start node %d: %w", i, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	c.cfg.Logf("chaos: node %d started (pid %d) %v", i, cmd.Process.Pid, c.extra[i])
	return nil
}

// syncMode is the nodes' --sync (Config.Sync, "always" when empty).
func (c *Cluster) syncMode() string {
	if c.cfg.Sync == "" {
		return "always"
	}
	return c.cfg.Sync
}

// cleanEnv is the environment of a node: the test's, without any SMQD_
// variable (every flag has one), plus add.
func cleanEnv(add ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SMQD_") {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// Kill sends SIGKILL to node i and waits until it is gone; a node that is
// down already is left alone.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i-1]
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	<-n.done
	n.cmd, n.done = nil, nil
	c.cfg.Logf("chaos: node %d killed", i)
}

// KillAll sends SIGKILL to every running node, one signal right after the
// other and before waiting for any, then waits until each is gone: a kill
// -9 of every node at one instant, as near as signals get (no node goes on
// working after another's exit is seen). It returns the nodes it killed.
func (c *Cluster) KillAll() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var killed []*Node
	for _, n := range c.Nodes {
		if n.cmd != nil {
			n.cmd.Process.Kill()
			killed = append(killed, n)
		}
	}
	ids := make([]int, 0, len(killed))
	for _, n := range killed {
		<-n.done
		n.cmd, n.done = nil, nil
		ids = append(ids, n.ID)
	}
	c.cfg.Logf("chaos: nodes %v killed at once", ids)
	return ids
}

// Stop shuts node i down as an operator does (SIGTERM) and waits for it
// to exit, at most bound; one that is still running then is killed, and
// that, or an exit status other than 0, is an error: a graceful stop must
// end on its own, under load too.
func (c *Cluster) Stop(i int, bound time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i-1]
	if n.cmd == nil {
		return nil
	}
	start := time.Now()
	n.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-n.done:
		if !n.cmd.ProcessState.Success() {
			err = fmt.Errorf("node %d exited with %v after SIGTERM", i, n.cmd.ProcessState)
		}
	case <-time.After(bound):
		n.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into its log
		time.Sleep(time.Second)
		n.cmd.Process.Kill()
		<-n.done
		err = fmt.Errorf("node %d still ran %v after SIGTERM (killed; goroutine dump in its log)", i, bound)
	}
	n.cmd, n.done = nil, nil
	c.stops = append(c.stops, StopWindow{Node: i, Start: start, End: time.Now()})
	c.cfg.Logf("chaos: node %d stopped (SIGTERM) in %v", i, time.Since(start).Round(time.Millisecond))
	return err
}

// Up reports whether node i's process runs (it may have exited on its own:
// then it is reported down and the exit noted).
func (c *Cluster) Up(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Nodes[i-1]
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Exited lists the nodes whose process ended without Kill (a crash).
func (c *Cluster) Exited() []int {
	var out []int
	for _, n := range c.Nodes {
		c.mu.Lock()
		running := n.cmd != nil
		c.mu.Unlock()
		if running && !c.Up(n.ID) {
			out = append(out, n.ID)
		}
	}
	return out
}

// Wipe removes node i's data directory (the node must be down).
func (c *Cluster) Wipe(i int) error {
	if c.Up(i) {
		return fmt.Errorf("node %d is running", i)
	}
	c.cfg.Logf("chaos: node %d's data directory wiped", i)
	return os.RemoveAll(c.Nodes[i-1].DataDir)
}

// SetLink sets the faults of link from→to.
func (c *Cluster) SetLink(from, to int, f Faults) { c.links[link{from, to}].Set(f) }

// SetAll sets the faults of every link.
func (c *Cluster) SetAll(f Faults) {
	for _, p := range c.links {
		p.Set(f)
	}
}

// Isolate cuts node i off from every other node: out cuts its outgoing
// links, in its incoming ones (both: a symmetric partition).
func (c *Cluster) Isolate(i int, out, in bool) {
	for _, n := range c.Nodes {
		if n.ID == i {
			continue
		}
		if out {
			c.SetLink(i, n.ID, Faults{Cut: true})
		}
		if in {
			c.SetLink(n.ID, i, Faults{Cut: true})
		}
	}
	c.cfg.Logf("chaos: node %d isolated (outgoing %v, incoming %v)", i, out, in)
}

// Heal lifts every link fault.
func (c *Cluster) Heal() {
	c.SetAll(Faults{})
	c.cfg.Logf("chaos: every link healed")
}

// Client returns a status client of node i.
func (c *Cluster) Client(i int) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clients[i]
}

// Status returns node i's view of the cluster.
func (c *Cluster) Status(i int) (cluster.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.statusTO)
	defer cancel()
	return c.Client(i).Status(ctx)
}

// Leader returns the node that leads shard and takes its changes (0: none
// known), as the running nodes report it.
func (c *Cluster) Leader(shard int) int {
	for _, n := range c.Nodes {
		if !c.Up(n.ID) {
			continue
		}
		st, err := c.Status(n.ID)
		if err != nil || shard >= len(st.Shards) {
			continue
		}
		if s := st.Shards[shard]; s.Ready && s.Leader == uint64(n.ID) {
			return n.ID
		}
	}
	return 0
}

// converged is nil when every node of live runs and says it is healthy,
// and every shard has one leader whose voters are voters and whose
// followers are the other voters, those of live active and caught up (a
// voter not in live is down for good: a dead member not removed yet).
func (c *Cluster) converged(live, voters []int) error {
	all := make([]uint64, 0, len(voters))
	for _, id := range voters {
		all = append(all, uint64(id))
	}
	slices.Sort(all)
	var sts []cluster.Status
	for _, id := range live {
		if !c.Up(id) {
			return fmt.Errorf("node %d is down", id)
		}
		st, err := c.Status(id)
		if err != nil {
			return fmt.Errorf("node %d: %w", id, err)
		}
		if !st.Healthy {
			return fmt.Errorf("node %d: %s (vote held %v)", id, st.Problem, st.VoteHeld)
		}
		sts = append(sts, st)
	}
	for sh := 0; sh < c.cfg.Shards; sh++ {
		var lead *cluster.ShardStatus
		for i := range sts {
			if s := &sts[i].Shards[sh]; s.Ready {
				lead = s
			}
		}
		if lead == nil {
			return fmt.Errorf("shard %d: no leader", sh)
		}
		got := slices.Clone(lead.Voters)
		slices.Sort(got)
		if !slices.Equal(got, all) {
			return fmt.Errorf("shard %d: voters %v, want %v", sh, got, all)
		}
		if len(lead.Followers) != len(all)-1 {
			return fmt.Errorf("shard %d: %d followers", sh, len(lead.Followers))
		}
		for _, f := range lead.Followers {
			if !slices.Contains(live, int(f.NodeID)) {
				continue
			}
			if !f.Active || f.Lag > 0 || f.State != "replicate" {
				// The follower's own view beside the leader's, for a
				// follower that stays behind.
				var own cluster.ShardStatus
				for i := range sts {
					if sts[i].NodeID == f.NodeID {
						own = sts[i].Shards[sh]
					}
				}
				return fmt.Errorf("shard %d: follower %d %s, lag %d, active %v (leader %d term %d commit %d last %d, appends queued %d busy %v: match %d, next %d, paused %v, inflight %d; the follower: %s, leader %d, term %d, commit %d, applied %d, last %d, appends queued %d busy %v, installing %v, appends refused %d)",
					sh, f.NodeID, f.State, f.Lag, f.Active, lead.Leader, lead.Term, lead.Commit, lead.LastIndex, lead.AppendQueued, lead.AppendBusy,
					f.Match, f.Next, f.Paused, f.Inflight,
					own.Role, own.Leader, own.Term, own.Commit, own.Applied, own.LastIndex, own.AppendQueued, own.AppendBusy, own.Installing, own.AppendsRefused)
			}
		}
	}
	return nil
}

// WaitHealthy waits until every member (Members) runs and is healthy and
// every shard's followers have caught up with its leader.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	m := c.Members()
	return c.WaitConverged(m, m, timeout)
}

// WaitConverged waits until the nodes of live run and are healthy, and
// every shard's voters are voters and its followers of live have caught up
// with its leader (converged).
func (c *Cluster) WaitConverged(live, voters []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = c.converged(live, voters); err == nil {
			return nil
		}
		if ex := c.Exited(); len(ex) > 0 {
			return fmt.Errorf("node(s) %v exited on their own:\n%s", ex, c.LogTail(ex[0], 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster not converged (nodes %v of voters %v) after %v: %w", live, voters, timeout, err)
}

// LogTail returns the last lines of node i's log.
func (c *Cluster) LogTail(i, lines int) string {
	b, _ := os.ReadFile(c.Nodes[i-1].logPath)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Close kills every node and closes every proxy and client.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		c.Kill(n.ID)
	}
	for _, p := range c.links {
		p.Close()
	}
	for _, cl := range c.clients {
		cl.Close()
	}
}
