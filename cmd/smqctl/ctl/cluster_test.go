package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/cmd/internal/testnet"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/server"
	"github.com/smqd/smqd/server/mnsauth"
)

// testCluster is three cluster nodes in this process, each with the API
// server smqd runs on it.
type testCluster struct {
	raft  map[uint64]string // raft addresses by node id
	api   []string          // API addresses, node i+1 at i
	nodes []*cluster.Node
}

// logWriter sends a node's warnings to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startCluster starts three nodes of two shards and waits until node 1
// can serve every shard.
func startCluster(t *testing.T) *testCluster {
	const n = 3
	c := &testCluster{raft: map[uint64]string{}}
	for i := range n {
		c.raft[uint64(i+1)] = testnet.FreeLoopback(t)
	}
	for i := range n {
		c.start(t, uint64(i+1), false)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := c.nodes[0].Health()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster has no leaders: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// settled waits until each shard is led by its preferred leader
// (engine/cluster/balance.go: shard i by node i mod 3 + 1), after which
// the balancer moves no lead.
func (c *testCluster) settled(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s := 0; s < c.nodes[0].Shards(); {
		if c.nodes[s%len(c.nodes)].Leading(s) {
			s++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not lead shard %d", s%len(c.nodes)+1, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ctl runs smqctl against node i+1.
// start starts node id of c at c.raft[id] (joining: --join) with a server
// of its own, stopped when the test ends.
func (c *testCluster) start(t *testing.T, id uint64, join bool) {
	const shards = 2
	log := slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	key := []byte("smqctl-test-cluster-key-0123456789")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eo := engine.Options{Stripes: 2, FreeSpaceReserve: -1}
	eo.WAL.SegmentBytes, eo.WAL.BufferBytes = 256<<10, 256<<10
	peers := map[uint64]string{}
	for m, a := range c.raft {
		if m <= 3 {
			peers[m] = a // the first members
		}
	}
	node, err := cluster.Start(cluster.Config{NodeID: id, RaftListen: c.raft[id], Peers: peers, Join: join,
		APIAddr: ln.Addr().String(), Version: "build-" + strconv.FormatUint(id, 10), Shards: shards, Dir: filepath.Join(t.TempDir(), strconv.FormatUint(id, 10)), Key: key,
		Engine: eo, SyncAlways: true, Tick: 20 * time.Millisecond, ElectionTicks: 50, Logger: log})
	if err != nil {
		t.Fatalf("node %d: %v", id, err)
	}
	srv, err := server.NewCluster(node, server.Options{Credentials: map[string]string{keyID: keySecret}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		node.Close()
	})
	c.nodes = append(c.nodes, node)
	c.api = append(c.api, ln.Addr().String())
}

func (c *testCluster) ctl(t *testing.T, i int) *ctl { return ctlAt(t, "http://"+c.api[i]) }

// smqctl cluster status, add and rm against three nodes: the table, the
// JSON, the membership they change, and the exit codes of the mistakes.
func TestClusterCommands(t *testing.T) {
	c := startCluster(t)
	ctl := c.ctl(t, 0)

	// A cluster serves topics as a single node does, through any node.
	ctl.ok("topic", "create", "news")
	if out := c.ctl(t, 1).ok("topic", "ls"); !strings.Contains(out, "news") {
		t.Errorf("smqctl topic ls through another node: %q", out)
	}
	c.ctl(t, 2).ok("subscription", "ls", "news")

	// A backup through any node is the cluster's, and says how to restore it.
	if clusterBackupFormat != cluster.BackupFormat {
		t.Fatalf("smqctl's clusterBackupFormat %d, engine/cluster's %d", clusterBackupFormat, cluster.BackupFormat)
	}
	if out := c.ctl(t, 1).ok("backup", "-o", filepath.Join(t.TempDir(), "c.smqd")); !strings.Contains(out, "--cluster-peers") || !strings.Contains(out, "a cluster's backup") {
		t.Errorf("smqctl backup of a cluster: %q", out)
	}

	// A dead-letter queue on another shard than its source: the move is a
	// hop between shards, and the redrive through a third node goes back.
	src := "src"
	for i := 0; c.nodes[0].ShardOf(src) == c.nodes[0].ShardOf("dlq"); i++ {
		src = "src" + strconv.Itoa(i)
	}
	ctl.ok("queue", "create", "dlq")
	ctl.ok("queue", "create", src, "--dead-letter-queue", "dlq", "--max-receive-count", "1", "--visibility-timeout", "1")
	ctl.ok("send", src, "back again", "--priority", "2")
	ctl.ok("receive", src, "--wait", "1s")
	deadline := time.Now().Add(20 * time.Second)
	for decodeJSON[Queue](t, ctl.ok("--json", "queue", "get", "dlq")).ActiveMessages != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the message never reached its dead-letter queue on another shard")
		}
		ctl.ok("receive", src, "--wait", "1s") // the receive after its visibility ends moves it
	}
	if res := decodeJSON[redriveResult](t, c.ctl(t, 2).ok("queue", "redrive", "dlq", "--json")); res.Moved != 1 || res.To[src] != 1 {
		t.Errorf("redrive through node 3: %+v", res)
	}
	if ms := decodeJSON[[]Message](t, ctl.ok("receive", src, "--wait", "1s", "--json")); len(ms) != 1 || ms[0].MessageBody != "back again" || ms[0].Priority != 2 || ms[0].DequeueCount != 1 || len(ms[0].SystemProperties) != 0 {
		t.Errorf("%s after the redrive: %+v", src, ms)
	}

	// The table, asked of shard 0's leader, so that a leader's row (with
	// its followers) is always there: the node's health, its members, each
	// shard's leader. The preferred leaders first: a balancer's hand-over
	// between the read of the leader and the table moved the leader's row.
	c.settled(t)
	lead := c.nodes[0].Status().Shards[0].Leader
	if lead < 1 || lead > 3 {
		t.Fatalf("shard 0's leader is %d", lead)
	}
	var followers []string
	for id := range uint64(3) {
		if id+1 != lead {
			followers = append(followers, strconv.FormatUint(id+1, 10))
		}
	}
	out := c.ctl(t, int(lead-1)).ok("cluster", "status")
	if !strings.HasPrefix(out, fmt.Sprintf("node %d: healthy; ", lead)) {
		t.Errorf("cluster status does not start with node %d's health:\n%s", lead, out)
	}
	sections := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(sections) != 3 {
		t.Fatalf("cluster status: want a health line, a member table and a shard table:\n%s", out)
	}
	members := strings.Split(sections[1], "\n")
	if f := strings.Fields(members[0]); !slices.Equal(f, []string{"MEMBER", "RAFT", "API", "DISK", "VERSION"}) {
		t.Errorf("member table header %q", members[0])
	}
	if len(members) != 4 {
		t.Fatalf("member table, want 3 members:\n%s", sections[1])
	}
	for i, row := range members[1:] {
		f := strings.Fields(row)
		if len(f) < 5 || f[0] != strconv.Itoa(i+1) || f[1] != c.raft[uint64(i+1)] || f[3] != "ok" || f[4] != "build-"+strconv.Itoa(i+1) {
			t.Errorf("member row %q, want node %d at %s, running build-%d (each member asked for its version)", row, i+1, c.raft[uint64(i+1)], i+1)
		}
	}
	shards := strings.Split(sections[2], "\n")
	if len(shards) != 3 || !strings.HasPrefix(shards[0], "SHARD") {
		t.Fatalf("shard table, want 2 shards:\n%s", sections[2])
	}
	for i, row := range shards[1:] {
		f := strings.Fields(row)
		if len(f) < 6 || f[0] != strconv.Itoa(i) || f[2] == "0" || f[3] == "0" {
			t.Errorf("shard row %q: want shard %d with a leader and a term", row, i)
		}
		if i == 0 && f[1] != "leader" {
			t.Errorf("shard 0's leader does not say it leads: %q", row)
		}
		if f[1] != "leader" {
			continue
		}
		// The node leads this shard: it lists its two followers, id:lag.
		var ids []string
		for _, fl := range f[6:] {
			id, _, _ := strings.Cut(fl, ":")
			ids = append(ids, id)
		}
		if f[2] != strconv.FormatUint(lead, 10) || !slices.Equal(ids, followers) {
			t.Errorf("leader row %q: want leader %d and followers %v", row, lead, followers)
		}
	}

	// The JSON is GET /cluster's document.
	st := decodeJSON[cluster.Status](t, ctl.ok("--json", "cluster", "status"))
	if st.NodeID != 1 || len(st.Members) != 3 || len(st.Shards) != 2 {
		t.Errorf("cluster status --json: %+v", st)
	}
	for _, sh := range st.Shards {
		if sh.Leader == 0 || sh.Term == 0 {
			t.Errorf("shard %d without a leader in the JSON: %+v", sh.Shard, sh)
		}
	}

	// Node 4 cannot be added before it runs: no shard would reach it.
	raft4 := testnet.FreeLoopback(t)
	if r := ctl.fail(ExitError, "cluster", "add", "4", raft4); !strings.Contains(r.stderr, "cannot be reached") {
		t.Errorf("adding a node that does not run: %q", r.stderr)
	}
	if m := c.nodes[0].Members(); !slices.Equal(m, []uint64{1, 2, 3}) {
		t.Fatalf("members after the refused add: %v", m)
	}
	// Started with --join, it is added: a majority of the three first
	// members commits the change in every shard.
	c.raft[4] = raft4
	c.start(t, 4, true)
	if out := ctl.ok("cluster", "add", "4", raft4); out != "node 4 added in every shard\n" {
		t.Errorf("cluster add: %q", out)
	}
	if m := c.nodes[0].Members(); !slices.Equal(m, []uint64{1, 2, 3, 4}) {
		t.Fatalf("members after cluster add: %v", m)
	}
	st = decodeJSON[cluster.Status](t, ctl.ok("--json", "cluster", "status"))
	if len(st.Members) != 4 || st.Members[3].NodeID != 4 || st.Members[3].Raft != raft4 {
		t.Errorf("cluster status after the add: %+v", st.Members)
	}
	// A member already, through another node: refused, nothing changes.
	r := c.ctl(t, 1).fail(ExitError, "cluster", "add", "4", raft4)
	if !strings.Contains(r.stderr, "member already") {
		t.Errorf("adding a member again: %q", r.stderr)
	}

	// Remove it again, with --json.
	rm := decodeJSON[map[string]any](t, ctl.ok("--json", "cluster", "rm", "4"))
	if rm["node_id"] != float64(4) || rm["removed"] != true || len(rm) != 2 {
		t.Errorf("cluster rm --json: %v", rm)
	}
	if m := c.nodes[0].Members(); !slices.Equal(m, []uint64{1, 2, 3}) {
		t.Fatalf("members after cluster rm: %v", m)
	}

	// An unknown node: the server refuses, exit 1, nothing changes.
	r = ctl.fail(ExitError, "cluster", "rm", "9")
	if !strings.Contains(r.stderr, "node 9 is not a member") || r.stdout != "" {
		t.Errorf("removing an unknown node: stdout %q stderr %q", r.stdout, r.stderr)
	}
	ctl.fail(ExitError, "--json", "cluster", "rm", "9")
	if m := c.nodes[0].Members(); !slices.Equal(m, []uint64{1, 2, 3}) {
		t.Fatalf("members after the refused removal: %v", m)
	}
	// Bad command lines never reach the server.
	for _, args := range [][]string{
		{"cluster", "rm"},
		{"cluster", "rm", "0"},
		{"cluster", "rm", "x"},
		{"cluster", "add", "5"},
		{"cluster", "add", "5", "no-port"},
		{"cluster", "status", "extra"},
		{"cluster", "promote", "2"},
	} {
		ctl.fail(ExitUsage, args...)
	}
	// Bad credentials.
	bad := c.ctl(t, 2)
	bad.env["ALIBABA_CLOUD_ACCESS_KEY_SECRET"] = "wrong"
	bad.fail(ExitAuth, "cluster", "rm", "3")
	if m := c.nodes[0].Members(); !slices.Equal(m, []uint64{1, 2, 3}) {
		t.Fatalf("members after a removal with a wrong secret: %v", m)
	}
}

// A single smqd is not a cluster: every cluster command says so and exits 1.
func TestClusterCommandsOnASingleNode(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	for _, args := range [][]string{
		{"cluster", "status"},
		{"--json", "cluster", "status"},
		{"cluster", "add", "2", "127.0.0.1:7000"},
		{"cluster", "rm", "2"},
	} {
		r := c.fail(ExitError, args...)
		if !strings.Contains(r.stderr, "single node") || r.stdout != "" {
			t.Errorf("smqctl %s: stdout %q stderr %q", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}
}

// smqctl stats through any cluster node shows every queue's rates and its
// oldest message's age: a node exports the series of the queues whose
// shards it leads, so stats adds up the members' /metrics. (Through a
// node leading no shard it showed no rates at all, and through one
// leading some, none for the other shards' queues.)
func TestClusterStats(t *testing.T) {
	c := startCluster(t)
	names := map[int]string{}
	for i := 0; len(names) < 2; i++ {
		q := "q" + strconv.Itoa(i)
		if _, ok := names[c.nodes[0].ShardOf(q)]; !ok {
			names[c.nodes[0].ShardOf(q)] = q
		}
	}
	ctl := c.ctl(t, 0)
	for _, q := range names {
		ctl.ok("queue", "create", q)
		ctl.ok("send", q, "x")
	}
	for i := range c.nodes {
		// A queue whose lead moved between the two refreshes shows no
		// rates for that refresh (docs/operations.md, smqctl stats), and
		// right after the start the balancer may still be moving leads to
		// their preferred members: a few tries, each of two refreshes.
		var bad []string
		for try := 0; try == 0 || len(bad) > 0 && try < 10; try++ {
			bad = nil
			lines := strings.Split(strings.TrimSpace(c.ctl(t, i).ok("stats", "--count", "2", "--interval", "200ms", "--json")), "\n")
			var last struct {
				Queues []queueRates `json:"queues"`
			}
			if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &last) != nil || len(last.Queues) != 2 {
				t.Fatalf("stats through node %d: %q", i+1, lines)
			}
			for _, q := range last.Queues {
				if q.Sent == nil || q.Deleted == nil || q.OldestWaiting == nil || q.Active != 1 {
					bad = append(bad, fmt.Sprintf("queue %s: %+v", q.Name, q))
				}
			}
		}
		if len(bad) > 0 {
			t.Errorf("stats through node %d, 10 tries: %v", i+1, bad)
		}
	}
}

// fakeClusterStatus serves GET /cluster with whatever document answer
// holds, to a ctl pointed at it.
func fakeClusterStatus(t *testing.T) (*atomic.Value, *ctl) {
	answer := new(atomic.Value)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer.Load().(string))
	}))
	t.Cleanup(srv.Close)
	return answer, ctlAt(t, srv.URL)
}

// cluster status exits 5 for a node that is not healthy, or warns of a
// voter it cannot reach, and prints the status all the same; it exited 0
// while it printed "NOT healthy" (console2 audit, 2026-12-06).
func TestClusterStatusExitsUnhealthy(t *testing.T) {
	answer, c := fakeClusterStatus(t)
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"node_id":1,"healthy":true}`, ExitOK},
		{`{"node_id":1,"healthy":false,"problem":"shard 0: cluster: the shard has no leader yet"}`, ExitUnhealthy},
		{`{"node_id":1,"healthy":true,"voters_not_members":[3]}`, ExitUnhealthy},
	} {
		answer.Store(tc.body)
		for _, args := range [][]string{{"cluster", "status"}, {"--json", "cluster", "status"}} {
			r := c.run(args...)
			if r.code != tc.code || !strings.Contains(r.stdout, "1") {
				t.Errorf("%s for %s: exit %d (want %d), stdout %q, stderr %q", strings.Join(args, " "), tc.body, r.code, tc.code, r.stdout, r.stderr)
			}
		}
	}
}

// A node whose shards' voters differ from shard 0's says that a
// membership change is under way or was cut short, and what to do; one
// whose shards agree says nothing of it.
func TestClusterStatusNotesShardsWhoseVotersDiffer(t *testing.T) {
	answer, c := fakeClusterStatus(t)
	answer.Store(`{"node_id":1,"healthy":true,"shards":[{"shard":0,"voters":[1,2,3,4]},{"shard":1,"voters":[3,2,1]},{"shard":2,"voters":[1,2,3,4]}]}`)
	out := c.ok("cluster", "status")
	if !strings.Contains(out, "shard 0: [1 2 3 4]; shard 1: [1 2 3]): a membership change is under way") || strings.Contains(out, "shard 2:") {
		t.Errorf("voters differ, stdout:\n%s", out)
	}
	answer.Store(`{"node_id":1,"healthy":true,"shards":[{"shard":0,"voters":[1,2,3]},{"shard":1,"voters":[3,2,1]}]}`)
	if out := c.ok("cluster", "status"); strings.Contains(out, "membership change") {
		t.Errorf("voters alike, stdout:\n%s", out)
	}
}

// memberVersions asks the members at once: a member's answer may come in
// while the others are still being started. It marked each member "?" in
// the loop that starts them, a map write racing the first answers' (the
// race detector saw it in CI, once in about 30 runs of
// TestClusterCommands). Here the first member answers at once and 20,000
// members with no known address keep that loop busy behind it.
func TestMemberVersionsWhileAnswersComeIn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"node_id":1,"version":"v1"}`)
	}))
	defer srv.Close()
	var st clusterStatus
	st.Members = make([]struct {
		NodeID   uint64 `json:"node_id"`
		Raft     string `json:"raft"`
		API      string `json:"api"`
		DiskFull bool   `json:"disk_full"`
	}, 20001)
	for i := range st.Members {
		st.Members[i].NodeID = uint64(i + 1)
	}
	st.Members[0].API = strings.TrimPrefix(srv.URL, "http://")
	c := &client{base: srv.URL, key: mnsauth.NewKey(keyID, keySecret), hc: srv.Client()}
	got := memberVersions(context.Background(), c, &st)
	if len(got) != len(st.Members) || got[1] != "v1" || got[2] != "?" || got[20001] != "?" {
		t.Errorf("versions: %d of them, node 1 %q, node 2 %q, node 20001 %q", len(got), got[1], got[2], got[20001])
	}
}
