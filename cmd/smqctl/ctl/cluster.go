package ctl

// smqctl cluster: a cluster node's view (GET /cluster) and the signed
// membership operations (PUT and DELETE /cluster/nodes/{id}).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clusterStatus is GET /cluster's document (the fields smqctl shows).
type clusterStatus struct {
	NodeID  uint64 `json:"node_id"`
	Version string `json:"version"`
	Healthy bool   `json:"healthy"`
	Problem string `json:"problem"`
	Members []struct {
		NodeID   uint64 `json:"node_id"`
		Raft     string `json:"raft"`
		API      string `json:"api"`
		DiskFull bool   `json:"disk_full"`
	} `json:"members"`
	Shards []struct {
		Shard     int      `json:"shard"`
		Role      string   `json:"role"`
		Leader    uint64   `json:"leader"`
		Term      uint64   `json:"term"`
		Commit    uint64   `json:"commit_index"`
		Applied   uint64   `json:"applied_index"`
		Voters    []uint64 `json:"voters"`
		Followers []struct {
			NodeID uint64 `json:"node_id"`
			Lag    uint64 `json:"lag"`
			State  string `json:"state"`
			Active *bool  `json:"active"` // absent: answering (versions before stop 57 sent Raft's RecentActive here, false for a live follower at moments)

		} `json:"followers"`
	} `json:"shards"`
	Forwarded        int64    `json:"forwarded"`
	VotersNotMembers []uint64 `json:"voters_not_members"`
	VoteHeld         bool     `json:"vote_held"`
}

func (r *run) clusterStatus(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	if _, err := r.parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	_, b, err := c.do(rctx, "GET", "/cluster", nil, nil)
	if err != nil {
		return err
	}
	var st clusterStatus
	jerr := json.Unmarshal(b, &st)
	if r.g.json {
		if _, err := r.env.Stdout.Write(b); err != nil {
			return err
		}
		if jerr == nil && (!st.Healthy || len(st.VotersNotMembers) > 0) {
			return errUnhealthy
		}
		return nil
	}
	if err := jerr; err != nil {
		return fmt.Errorf("GET /cluster: %w", err)
	}
	health := "healthy"
	if !st.Healthy {
		health = "NOT healthy: " + st.Problem
	}
	fmt.Fprintf(r.env.Stdout, "node %d: %s; %d requests forwarded\n\n", st.NodeID, health, st.Forwarded)
	for _, id := range st.VotersNotMembers {
		fmt.Fprintf(r.env.Stdout, "WARNING: node %d votes in the shards but this node knows no address for it, so it sends it nothing. "+
			"If another member lists it (smqctl --endpoint OTHER cluster status), this node asks the members for its address and learns it within a minute; "+
			"if it does not (members of an older build do not answer), restart this node with %d in --cluster-peers. "+
			"If no member lists it, it is no member: remove it (smqctl cluster rm %d)\n\n", id, id, id)
	}
	if st.VoteHeld {
		fmt.Fprintf(r.env.Stdout, "NOTE: node %d holds its vote: it started empty, or its machine restarted under --sync interval or none (a power loss), or an earlier start held it, so it may have lost entries it acknowledged. "+
			"It grants no vote and leads no shard until a member replaces it, which needs the shards' leaders; a shard whose other members cannot elect one without it waits for its down members to come back\n\n", st.NodeID)
	}
	if d := votersDiffer(&st); d != "" {
		fmt.Fprintf(r.env.Stdout, "NOTE: the shards' voters differ here (%s): a membership change is under way, or one was cut short. "+
			"Every other change is refused until it is finished: repeat it (smqctl cluster add or rm), or remove a node it added that is gone with cluster rm --force\n\n", d)
	}
	versions := memberVersions(rctx, c, &st)
	rows := [][]string{{"MEMBER", "RAFT", "API", "DISK", "VERSION"}}
	for _, m := range st.Members {
		disk := "ok"
		switch {
		case m.DiskFull:
			disk = "FULL" // below its free-space reserve: it leads no shard
		case versions[m.NodeID] == "?":
			disk = "?" // it did not answer: what it last said may be old
		}
		rows = append(rows, []string{strconv.FormatUint(m.NodeID, 10), m.Raft, m.API, disk, versions[m.NodeID]})
	}
	r.table(rows)
	fmt.Fprintln(r.env.Stdout)
	rows = [][]string{{"SHARD", "ROLE", "LEADER", "TERM", "COMMIT", "APPLIED", "FOLLOWERS (id:lag)"}}
	for _, s := range st.Shards {
		var fl []string
		for _, f := range s.Followers {
			if f.Active != nil && !*f.Active {
				fl = append(fl, fmt.Sprintf("%d:%d(not-answering)", f.NodeID, f.Lag))
				continue
			}
			fl = append(fl, fmt.Sprintf("%d:%d", f.NodeID, f.Lag))
		}
		rows = append(rows, []string{strconv.Itoa(s.Shard), s.Role, strconv.FormatUint(s.Leader, 10),
			strconv.FormatUint(s.Term, 10), strconv.FormatUint(s.Commit, 10), strconv.FormatUint(s.Applied, 10), strings.Join(fl, " ")})
	}
	r.table(rows)
	if !st.Healthy || len(st.VotersNotMembers) > 0 {
		return errUnhealthy
	}
	return nil
}

// votersDiffer names the shards whose voters, as the node applied them,
// differ from shard 0's (the cluster orders membership changes through
// shard 0: engine/cluster/memberorder.go), or returns "".
func votersDiffer(st *clusterStatus) string {
	if len(st.Shards) == 0 {
		return ""
	}
	zero := slices.Sorted(slices.Values(st.Shards[0].Voters))
	out := fmt.Sprintf("shard 0: %v", zero)
	differ := false
	for _, s := range st.Shards[1:] {
		if v := slices.Sorted(slices.Values(s.Voters)); !slices.Equal(v, zero) {
			out += fmt.Sprintf("; shard %d: %v", s.Shard, v)
			differ = true
		}
	}
	if !differ {
		return ""
	}
	return out
}

// errUnhealthy: cluster status printed a node that is not healthy, or that
// warns of voters it cannot reach (ExitUnhealthy). It exited 0 while it
// printed "NOT healthy" (console2 audit, 2026-12-06).
var errUnhealthy = errors.New("the node is not healthy, or warns of voters it cannot reach (see above)")

// memberBases returns the base URL of each member's API whose address is
// known, with the endpoint's scheme. A member's API address that binds
// every interface is reached at its Raft address's host.
func memberBases(c *client, st *clusterStatus) map[uint64]string {
	scheme, _, _ := strings.Cut(c.base, "://")
	out := map[uint64]string{}
	for _, m := range st.Members {
		host, port, err := net.SplitHostPort(m.API)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host, _, _ = net.SplitHostPort(m.Raft)
		}
		out[m.NodeID] = scheme + "://" + net.JoinHostPort(host, port)
	}
	return out
}

// memberVersions asks every member for its GET /cluster, at once, for
// the build it runs: "?" for a member that did not answer within 3 s (or
// whose address is not known), "-" for one that does not say (a version
// before 2026-12-06).
func memberVersions(ctx context.Context, c *client, st *clusterStatus) map[uint64]string {
	bases := memberBases(c, st)
	out := map[uint64]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range st.Members {
		out[m.NodeID] = "?" // before any goroutine writes out (a race, seen in CI)
	}
	for _, m := range st.Members {
		base, ok := bases[m.NodeID]
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			one := &client{base: base, key: c.key, hc: c.hc}
			_, b, err := one.do(mctx, "GET", "/cluster", nil, nil)
			var its clusterStatus
			if err != nil || json.Unmarshal(b, &its) != nil || its.NodeID != m.NodeID {
				return
			}
			mu.Lock()
			out[m.NodeID] = cmp.Or(its.Version, "-")
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (r *run) clusterAdd(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("cluster add ID RAFT-ADDRESS", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	id, err := nodeID(pos[0])
	if err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(pos[1]); err != nil {
		return usagef("cluster add: the raft address must be HOST:PORT: %v", err)
	}
	return r.member(ctx, "PUT", "/cluster/nodes/"+strconv.FormatUint(id, 10)+"?raft="+url.QueryEscape(pos[1]), id, "added")
}

func (r *run) clusterRm(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("cluster rm [--force] ID", flag.ContinueOnError)
	force := fs.Bool("force", false, "remove it even if some shard would then keep no majority of members that answer (the members down are gone for good, or will be back), and even while another membership change is under way or cut short (the way out of an add of a node that is gone)")
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	id, err := nodeID(pos[0])
	if err != nil {
		return err
	}
	target := "/cluster/nodes/" + strconv.FormatUint(id, 10)
	if *force {
		target += "?force=true"
	}
	return r.member(ctx, "DELETE", target, id, "removed")
}

func nodeID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usagef("a node id is a positive integer, not %q", s)
	}
	return id, nil
}

// member runs a membership change; it may take a while (every shard
// applies it), so it gets 30 s beyond --timeout.
func (r *run) member(ctx context.Context, method, target string, id uint64, done string) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 30*time.Second)
	defer cancel()
	if _, _, err := c.do(rctx, method, target, nil, nil); err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"node_id": id, done: true})
	}
	fmt.Fprintf(r.env.Stdout, "node %d %s in every shard\n", id, done)
	return nil
}
