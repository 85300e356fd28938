package main

// Cluster mode: with --cluster-peers (or --join) the daemon runs a cluster
// node (engine/cluster) instead of one broker: queues are spread over
// --shards Raft groups, every node's API serves every queue, and the
// nodes authenticate each other with the cluster key (docs/operations.md,
// "Running a cluster").

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/smqd/smqd/cmd/internal/version"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/server"
)

// clusterKeyEnv holds the cluster key when --cluster-key-file is not given
// (there is no flag for the key itself: a command line is visible to every
// user of the machine).
const clusterKeyEnv = "SMQD_CLUSTER_KEY"

type clusterConfig struct {
	nodeID      uint64
	raftListen  string
	peers       string
	shards      int
	keyFile     string
	keyEnv      string // the value of SMQD_CLUSTER_KEY
	acceptFile  string // --cluster-key-accept-file: another key taken from peers (a rotation)
	join        bool
	tick        time.Duration
	leaderWait  time.Duration
	clockOffset time.Duration
	flush       string
	hold        time.Duration
	leaseTicks  int
	tlsCert     string // --cluster-tls-cert: this node's certificate for the links between nodes
	tlsKey      string
	tlsCA       string // the CA (PEM) that signs every node's certificate
}

func (c *clusterConfig) addFlags(fs *flag.FlagSet) {
	fs.Uint64Var(&c.nodeID, "node-id", 0, "cluster mode: this node's id (1, 2, ...; unique in the cluster)")
	fs.StringVar(&c.raftListen, "raft-listen", "", "cluster mode: address the other nodes reach this one at (Raft and forwarded requests)")
	fs.StringVar(&c.peers, "cluster-peers", "", "cluster mode: the first members' Raft addresses, \"1=HOST:PORT,2=HOST:PORT,3=HOST:PORT\" (this node's included); empty: a single node")
	fs.IntVar(&c.shards, "shards", 8, "cluster mode: shards (Raft groups) queues are spread over; fixed when the cluster is created")
	fs.StringVar(&c.keyFile, "cluster-key-file", "", "cluster mode: file holding the cluster key (at least 16 bytes; keep it 0600); else the environment variable "+clusterKeyEnv)
	fs.StringVar(&c.acceptFile, "cluster-key-accept-file", "", "cluster mode: file holding another cluster key this node accepts from its peers and in receipt handles, but never uses itself: for rotating the cluster key with no downtime (docs/operations.md)")
	fs.BoolVar(&c.join, "join", false, "cluster mode: this node is not among --cluster-peers' first members; it waits for a member to add it (smqctl cluster add) and catches up")
	fs.DurationVar(&c.tick, "raft-tick", 50*time.Millisecond, "cluster mode: Raft's tick; a leader is presumed lost after 10 ticks without hearing from it (sooner when its connection drops)")
	fs.DurationVar(&c.clockOffset, "clock-offset", 0, "fault tests only: run the broker's clock this far from the system's (a node whose clock is wrong)")
	fs.StringVar(&c.flush, "cluster-flush", "shared", "cluster mode, --sync always: \"shared\": the shards' logs share one flush of the data directory's file system (syncfs; every file on it is flushed, so give the data directory a file system of its own); \"file\": each log flushes its own files (fdatasync)")
	fs.DurationVar(&c.hold, "cluster-proposal-hold", cluster.DefaultProposalHold, "cluster mode: how long a shard's leader may hold a change nobody waits for (a receive, an expiry) so that it is replicated with the next one in one round; 0: none")
	fs.IntVar(&c.leaseTicks, "cluster-read-lease-ticks", cluster.DefaultReadLeaseTicks, "cluster mode: ticks a member helps nobody else lead after it last heard from its leader, so that a leader answers receives for two thirds of that after a round of heartbeats without another (a read lease; a fast failover waits for it to end); 0: no lease, a round before every receive; at most 5")
	fs.StringVar(&c.tlsCert, "cluster-tls-cert", "", "cluster mode: PEM certificate of this node for mutual TLS between the nodes (with --cluster-tls-key and --cluster-tls-ca; re-read on SIGHUP): every link between nodes is then encrypted, and a process needs a certificate of --cluster-tls-ca besides the cluster key. It must name the host of this node's --cluster-peers address (an IP or DNS SAN)")
	fs.StringVar(&c.tlsKey, "cluster-tls-key", "", "cluster mode: PEM private key of --cluster-tls-cert (keep it 0600)")
	fs.StringVar(&c.tlsCA, "cluster-tls-ca", "", "cluster mode: PEM certificates of the CA that signs the nodes' certificates (the only one trusted between nodes)")
	fs.DurationVar(&c.leaderWait, "cluster-leader-wait", 2*time.Second, "cluster mode: how long a request for a shard without a leader waits for one before it is answered 503 ServiceUnavailable")
}

// clustered reports whether the daemon runs as a cluster node.
func (c *config) clustered() bool { return c.cluster.peers != "" || c.cluster.join }

func (c *config) validateCluster() error {
	cc := &c.cluster
	if !c.clustered() {
		if cc.nodeID != 0 || cc.raftListen != "" || cc.tlsCert != "" || cc.tlsKey != "" || cc.tlsCA != "" {
			return errors.New("--node-id, --raft-listen and --cluster-tls-* need --cluster-peers (or --join)")
		}
		return nil
	}
	if c.inMemory {
		return errors.New("cluster mode keeps every shard's log on disk: --in-memory does not go with --cluster-peers")
	}
	if !c.noAuth && c.accessKeyID == "" && c.credentialsFile == "" {
		// A forwarded request's signature is checked again on the leader.
		return errors.New("a cluster's nodes must share their access keys: give every node the same --credentials-file (or --access-key-id and --access-key-secret)")
	}
	if cc.nodeID == 0 {
		return errors.New("cluster mode needs --node-id (1, 2, ...)")
	}
	if _, _, err := net.SplitHostPort(cc.raftListen); err != nil {
		return fmt.Errorf("cluster mode needs --raft-listen HOST:PORT: %v", err)
	}
	peers, err := parsePeers(cc.peers)
	if err != nil {
		return err
	}
	if !cc.join {
		if a, ok := peers[cc.nodeID]; !ok {
			return fmt.Errorf("--cluster-peers must name this node (--node-id %d) unless it --join's", cc.nodeID)
		} else if a != cc.raftListen && !strings.HasPrefix(cc.raftListen, "0.0.0.0:") && !strings.HasPrefix(cc.raftListen, "[::]:") {
			return fmt.Errorf("--cluster-peers gives node %d the address %s, but --raft-listen is %s", cc.nodeID, a, cc.raftListen)
		}
	} else if len(peers) == 0 {
		return errors.New("--join needs --cluster-peers naming at least one member to reach")
	}
	if cc.shards < 1 || cc.shards > 1024 {
		return errors.New("--shards must be between 1 and 1024")
	}
	if cc.tick < time.Millisecond || cc.tick > time.Second {
		return errors.New("--raft-tick must be between 1ms and 1s")
	}
	if cc.flush != "shared" && cc.flush != "file" {
		return errors.New("--cluster-flush must be shared or file")
	}
	if cc.hold < 0 || cc.hold > time.Second {
		return errors.New("--cluster-proposal-hold must be between 0 and 1s")
	}
	if cc.leaseTicks < 0 || cc.leaseTicks > 5 {
		return errors.New("--cluster-read-lease-ticks must be between 0 and 5 (half the election timeout)")
	}
	if set := btoi(cc.tlsCert != "") + btoi(cc.tlsKey != "") + btoi(cc.tlsCA != ""); set != 0 && set != 3 {
		return errors.New("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together")
	}
	if cc.leaderWait <= 0 {
		return errors.New("--cluster-leader-wait must be positive")
	}
	if _, err := c.clusterKey(); err != nil {
		return err
	}
	if _, err := c.acceptedClusterKeys(); err != nil {
		return err
	}
	return nil
}

// parsePeers parses "1=HOST:PORT,2=HOST:PORT".
func parsePeers(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 {
			return nil, fmt.Errorf("--cluster-peers: %q is not ID=HOST:PORT with an id of 1 or more", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--cluster-peers: %q: %v", part, err)
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("--cluster-peers names node %d twice", n)
		}
		out[n] = addr
	}
	return out, nil
}

// clusterKey reads the cluster key from --cluster-key-file or the
// environment.
func (c *config) clusterKey() ([]byte, error) {
	cc := &c.cluster
	var key []byte
	switch {
	case cc.keyFile != "":
		b, err := os.ReadFile(cc.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cluster-key-file: %w", err)
		}
		key = []byte(strings.TrimSpace(string(b)))
	case cc.keyEnv != "":
		key = []byte(cc.keyEnv)
	default:
		return nil, fmt.Errorf("cluster mode needs the cluster key: --cluster-key-file or %s", clusterKeyEnv)
	}
	if len(key) < 16 {
		return nil, errors.New("the cluster key must be at least 16 bytes (use 32 random bytes, e.g. openssl rand -hex 32)")
	}
	return key, nil
}

// acceptedClusterKeys reads --cluster-key-accept-file (nil without it).
func (c *config) acceptedClusterKeys() ([][]byte, error) {
	if c.cluster.acceptFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.cluster.acceptFile)
	if err != nil {
		return nil, fmt.Errorf("--cluster-key-accept-file: %w", err)
	}
	key := []byte(strings.TrimSpace(string(b)))
	if len(key) < 16 {
		return nil, errors.New("--cluster-key-accept-file: the key must be at least 16 bytes")
	}
	return [][]byte{key}, nil
}

// clusterTLS is the mutual TLS configuration of the links between nodes
// (--cluster-tls-*), with the reloader of this node's certificate
// (SIGHUP); nil, nil without the flags.
func (c *config) clusterTLS(log *slog.Logger) (*tls.Config, *certReloader, error) {
	cc := &c.cluster
	if cc.tlsCert == "" {
		return nil, nil, nil
	}
	pem, err := os.ReadFile(cc.tlsCA)
	if err != nil {
		return nil, nil, fmt.Errorf("--cluster-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("--cluster-tls-ca: no PEM certificate in %s", cc.tlsCA)
	}
	// The host the other nodes dial this one at: its --cluster-peers
	// entry, else (a node that --join's) --raft-listen's host when it
	// names one.
	peers, _ := parsePeers(cc.peers)
	addr := cmp.Or(peers[cc.nodeID], cc.raftListen)
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	// A certificate the other nodes would refuse stops the node at start
	// (it could reach no one) and is not installed by a reload.
	certs := &certReloader{what: "cluster TLS certificate", certFile: cc.tlsCert, keyFile: cc.tlsKey, log: log, check: checkClusterCert(pool, host)}
	if err := certs.load(); err != nil {
		return nil, nil, fmt.Errorf("--cluster-tls-cert: %w", err)
	}
	warnIfShared(log, cc.tlsKey, "cluster TLS key")
	return &tls.Config{
		GetCertificate:       certs.getCertificate,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return certs.cert.Load(), nil },
		RootCAs:              pool,
		ClientCAs:            pool,
		ClientAuth:           tls.RequireAndVerifyClientCert,
		MinVersion:           tls.VersionTLS13,
	}, certs, nil
}

// startClusterNode starts this daemon's cluster node; eopts is every
// shard broker's template. certs, when not nil, reloads the node's
// certificate for the links between nodes (SIGHUP).
func startClusterNode(cfg *config, eopts engine.Options, apiAddr string, log *slog.Logger) (node *cluster.Node, certs *certReloader, err error) {
	cc := &cfg.cluster
	key, err := cfg.clusterKey()
	if err != nil {
		return nil, nil, err
	}
	if cc.keyFile != "" {
		warnIfShared(log, cc.keyFile, "cluster key")
	}
	accept, err := cfg.acceptedClusterKeys()
	if err != nil {
		return nil, nil, err
	}
	if accept != nil {
		warnIfShared(log, cc.acceptFile, "accepted cluster key")
		log.Info("accepting a second cluster key (--cluster-key-accept-file): finish the rotation by restarting without it", "file", cc.acceptFile)
	}
	tlsCfg, certs, err := cfg.clusterTLS(log)
	if err != nil {
		return nil, nil, err
	}
	if host, _, _ := net.SplitHostPort(cc.raftListen); tlsCfg == nil && host != "localhost" && !net.ParseIP(host).IsLoopback() {
		log.Warn("the links between nodes are authenticated but not encrypted: message bodies and forwarded requests cross them in clear text; give --cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca, or keep --raft-listen on a private network", "raft_listen", cc.raftListen)
	}
	peers, _ := parsePeers(cc.peers)
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	log.Info("cluster mode", "node_id", cc.nodeID, "raft_listen", cc.raftListen, "members", ids, "shards", cc.shards, "join", cc.join, "tls", tlsCfg != nil,
		"cluster_key_file", cc.keyFile, "raft_tick", cc.tick, "cluster_leader_wait", cc.leaderWait, "cluster_flush", cc.flush,
		"cluster_proposal_hold", cc.hold, "cluster_read_lease_ticks", cc.leaseTicks, "clock_offset", cc.clockOffset)
	if len(peers) > 0 && len(peers)%2 == 0 && !cc.join {
		log.Warn("an even number of members tolerates no more failures than one fewer: run 3 or 5", "members", len(peers))
	}
	if cc.clockOffset != 0 {
		log.Warn("the broker's clock is offset from the system's (--clock-offset): for fault tests only", "offset", cc.clockOffset)
		eopts.Clock = engine.OffsetClock(cc.clockOffset)
	}
	node, err = cluster.Start(cluster.Config{
		NodeID: cc.nodeID, RaftListen: cc.raftListen, Peers: peers, Join: cc.join,
		APIAddr: apiAddr, Version: version.Get().Short(), Shards: cc.shards, Dir: cfg.dataDir, Key: key, AcceptKeys: accept, TLS: tlsCfg, Engine: eopts,
		SyncAlways: cfg.sync == "always", FileFlush: cc.flush == "file", ProposalHold: proposalHold(cc.hold), ReadLeaseTicks: cmp.Or(cc.leaseTicks, -1), Tick: cc.tick, Logger: log.With("component", "cluster"),
	})
	return node, certs, err
}

// backend is what the daemon runs: one broker, or a cluster node.
type backend interface {
	Close() error
	ReleaseMemory()
}

// servedBroker is a single node's broker as its server holds it: after a
// restart in place (server.Options.Reopen) a new one, none while a reopen
// fails.
type servedBroker struct{ srv *server.Server }

func (b servedBroker) Close() error {
	if x := b.srv.Broker(); x != nil {
		return x.Close()
	}
	return nil
}

func (b servedBroker) ReleaseMemory() {
	if x := b.srv.Broker(); x != nil {
		x.ReleaseMemory()
	}
}

// activity returns what trimWhenIdle watches for traffic: the client
// requests, and on a cluster node its replication too (a node catching a
// follower up serves no request; trimming then forced a full collection of
// a busy heap every other second).
func activity(requests func() uint64, node *cluster.Node) func() uint64 {
	if node == nil {
		return requests
	}
	return func() uint64 { return requests() + node.Activity() }
}

// proposalHold maps the flag (0: none) to cluster.Config's (negative: none).
func proposalHold(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
