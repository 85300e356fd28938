package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smqd/smqd/bench"
	"github.com/smqd/smqd/cmd/internal/envflag"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// config is the effective configuration: the workload's bench.Config plus
// how to reach (or start) the target.
type config struct {
	bench bench.Config

	target          string
	addr            string
	endpoints       string
	serverPIDs      string // --server-pid: PID[,PID...]
	accessKeyID     string
	accessKeySecret string
	credentialsFile string
	contentMD5      bool
	visibility      time.Duration
	client          string // smqd's client: "fast" (fasthttp) or "sdk" (net/http + encoding/xml)

	spawn       string
	spawnListen string
	spawnArgs   string
	spawnEnv    string
	dataDir     string
	daemonLog   string
	sync        string
	syncIvl     time.Duration
	inMemory    bool
	stripes     int
	syncSet     bool // --sync given (flag or environment)

	peers []bench.Peer // the targets beyond smqd and inproc

	jsonOut    string
	quiet      bool
	progress   bool
	cpuProfile string
	memProfile string
}

const envPrefix = "SMQBENCH_"

func envName(flagName string) string { return envflag.Name(envPrefix, flagName) }

var workloads = []string{"cycle", "produce", "consume", "backlog", "publish"}

// parseConfig parses "<workload> [flags]" (the workload may also come
// after the flags) and SMQBENCH_* environment overrides.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer, peers []bench.Peer) (*config, error) {
	c := &config{peers: peers}
	b := &c.bench
	fs := flag.NewFlagSet("smqbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var batch, subs int
	var prio, delay string
	targetHelp, addrHelp := "smqd (MNS over HTTP) | inproc (engine in this process)", "smqd 127.0.0.1:8080"
	for _, p := range peers {
		targetHelp += " | " + p.Name
		addrHelp += ", " + p.Name + " " + p.DefaultAddr
	}
	if len(peers) == 0 {
		targetHelp += " (peer brokers: build bench/peers/cmd/smqbench)"
	}
	fs.StringVar(&c.target, "target", "smqd", "system under test: "+targetHelp)
	fs.StringVar(&c.addr, "addr", "", "server address (default per target: "+addrHelp+")")
	fs.StringVar(&c.endpoints, "endpoints", "", "smqd: several server addresses, A,B,C (the nodes of a cluster): workers are spread over them round robin; overrides --addr")
	fs.StringVar(&c.accessKeyID, "access-key-id", "", "MNS access key id (default: from --credentials-file)")
	fs.StringVar(&c.accessKeySecret, "access-key-secret", "", "MNS access key secret (prefer "+envName("access-key-secret")+")")
	fs.StringVar(&c.credentialsFile, "credentials-file", "", "smqd credentials file (\"<id> <secret>\" lines); default <data-dir>/credentials")
	fs.BoolVar(&c.contentMD5, "content-md5", false, "send the Go SDK's Content-MD5 header (costs an MD5 of every request body)")
	fs.StringVar(&c.client, "client", "fast", "how smqd is driven: fast (fasthttp, reused buffers, no allocation per request) | sdk (net/http, encoding/xml, headers in a map, as the MNS SDKs do)")
	fs.DurationVar(&c.visibility, "visibility-timeout", 30*time.Second, "VisibilityTimeout of the queues the bench creates (whole seconds)")

	fs.StringVar(&c.spawn, "spawn", "", "path of the smqd binary to start (and stop) for this run; with --data-dir")
	fs.StringVar(&c.spawnListen, "spawn-listen", "", "--listen of the spawned smqd (default: a free 127.0.0.1 port)")
	fs.StringVar(&c.spawnArgs, "spawn-args", "", "further flags for the spawned smqd, space separated")
	fs.StringVar(&c.spawnEnv, "spawn-env", "", "environment variables for the spawned smqd, space separated (e.g. \"GOGC=50 GOMEMLIMIT=96MiB\")")
	fs.StringVar(&c.dataDir, "data-dir", "", "data directory: of the spawned smqd, of the in-process engine (--target inproc), or where to find an running smqd's credentials")
	fs.StringVar(&c.daemonLog, "daemon-log", "", "log file of the spawned smqd (default <parent of data-dir>/smqd.log)")
	fs.StringVar(&c.sync, "sync", "always", "durability of the spawned smqd or the in-process engine: always | interval | none")
	fs.DurationVar(&c.syncIvl, "sync-interval", time.Second, "fsync period for --sync interval")
	fs.BoolVar(&c.inMemory, "in-memory", false, "in-process engine (or spawned smqd) without storage")
	fs.IntVar(&c.stripes, "stripes", 0, "stripes of the in-process engine's queues (0: engine default)")

	fs.StringVar(&b.Label, "label", "", "free text stored in the result (groups runs in 'smqbench report')")
	fs.IntVar(&b.Producers, "producers", 8, "producer workers (one connection each)")
	fs.IntVar(&b.Consumers, "consumers", 8, "consumer workers (one connection each)")
	fs.IntVar(&b.BodyBytes, "body", 1024, "message body bytes (>= 16: a send timestamp leads the body)")
	fs.IntVar(&batch, "batch", 1, "batch size 1..16 for send, receive and delete")
	fs.IntVar(&b.SendBatch, "send-batch", 0, "send batch size (default --batch)")
	fs.IntVar(&b.RecvBatch, "recv-batch", 0, "receive batch size (default --batch)")
	fs.IntVar(&b.DeleteBatch, "delete-batch", 0, "delete batch size (default --batch)")
	fs.IntVar(&b.Queues, "queues", 1, "number of queues")
	fs.StringVar(&b.QueuePrefix, "queue-prefix", "bench", "queue names are <prefix>-0, <prefix>-1, ...")
	fs.IntVar(&subs, "subs", 1, "publish: queue subscriptions of the topic (the fan-out), one queue each; replaces --queues")
	fs.StringVar(&b.Topic, "topic", "", "publish: the topic (default <queue-prefix>-topic)")
	fs.BoolVar(&b.KeepQueues, "keep-queues", false, "use the queues as they are (default: delete and recreate them)")
	fs.StringVar(&prio, "priority-mix", "", "priorities with weights, e.g. 1:10,8:80,16:10 (default: none sent)")
	fs.StringVar(&delay, "delay-mix", "", "DelaySeconds with weights, e.g. 0:95,2:5 (default: none)")
	fs.Float64Var(&b.Rate, "rate", 0, "open-loop arrival rate in msgs/s over all producers (0: closed loop)")
	fs.DurationVar(&b.Warmup, "warmup", 3*time.Second, "warm-up excluded from the figures")
	fs.DurationVar(&b.Duration, "duration", 10*time.Second, "measured window")
	fs.Int64Var(&b.Messages, "messages", 0, "cap on messages sent (cycle, produce); messages preloaded (consume, backlog)")
	fs.DurationVar(&b.Wait, "wait", time.Second, "long-poll wait of each receive (whole seconds on the wire, max 30s)")
	fs.DurationVar(&b.MaxTime, "max-time", 10*time.Minute, "bound of each backlog/consume phase (preload, drain)")
	fs.Int64Var(&b.MaxBacklog, "max-backlog", 0, "cycle, closed loop: hold producers while sent-but-not-deleted messages exceed this, so the deleted rate is sustainable (0: 10 x consumers x recv batch; -1: off, producers run free)")
	fs.Int64Var(&b.BacklogTolerance, "backlog-tolerance", 0, "cycle: allowed backlog growth over the window (0: max(1% of sent, in-flight capacity), and with --max-backlog at least the room below it)")
	fs.Float64Var(&b.MaxErrorPct, "max-error-pct", 1, "fail the run (exit 1, and report leaves it out) when its errors are more than this percentage of its requests")
	fs.Uint64Var(&b.Seed, "seed", 1, "seed of the priority and delay choices")
	fs.BoolVar(&b.RestartCheck, "restart-check", false, "backlog with --spawn: kill -9 the daemon after --restart-after of the drain, restart it, time the first receive, count the messages")
	fs.Float64Var(&b.RestartAfter, "restart-after", 0.5, "fraction of the preload drained before the restart check")
	fs.DurationVar(&b.SettleTime, "settle", 60*time.Second, "backlog: after the preload, wait at most this long for the target's resident memory to stop falling, and report it (0: do not wait)")

	fs.StringVar(&c.jsonOut, "json-out", "", "also append the JSON line to this file")
	fs.BoolVar(&c.quiet, "quiet", false, "no table on stderr (the JSON line still goes to stdout)")
	fs.BoolVar(&c.progress, "progress", true, "live progress line when stdout is a terminal")
	fs.StringVar(&c.serverPIDs, "server-pid", "", "measure the CPU of this server process (a peer, or an smqd not started by --spawn) over the window: server CPU per message and cores (Linux, /proc/<pid>/stat); several, PID,PID,..., are summed (the nodes of a cluster)")
	fs.IntVar(&b.RSSPID, "rss-pid", 0, "backlog: read the resident memory of this process (a peer server) after the preload (default --server-pid)")
	fs.StringVar(&c.memProfile, "memprofile", "", "write a heap profile of smqbench (with --target inproc: of the engine) after a backlog preload, else at the end")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of smqbench (with --target inproc: of the engine) to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  smqbench <%s> [flags]\n  smqbench report [--baseline smqd] results.jsonl...\n\nEvery flag can also be set by an environment variable, e.g. --addr by %s.\n\nFlags:\n",
			strings.Join(workloads, "|"), envName("addr"))
		fs.PrintDefaults()
	}
	var workload string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		workload, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if workload == "" && fs.NArg() > 0 {
		workload = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return nil, err
		}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if workload == "" {
		fs.Usage()
		return nil, errors.New("name a workload: " + strings.Join(workloads, ", "))
	}
	if !slices.Contains(workloads, workload) {
		return nil, fmt.Errorf("unknown workload %q: name one of %s", workload, strings.Join(workloads, ", "))
	}
	b.Workload = bench.Workload(workload)
	set, err := envflag.Apply(fs, envPrefix, getenv)
	if err != nil {
		return nil, err
	}
	c.syncSet = set["sync"]
	if c.target == "smqd" {
		// smqctl's --endpoint is a URL (http://host:port): the same given
		// here failed only once the run began ("too many colons").
		for _, v := range []*string{&c.addr, &c.endpoints} {
			if *v, err = hostPorts(*v); err != nil {
				return nil, err
			}
		}
	}
	if b.SendBatch == 0 {
		b.SendBatch = batch
		if b.Workload == bench.Publish {
			b.SendBatch = 1 // PublishMessage has no batch form: --batch is the consumers'
		}
	}
	if b.RecvBatch == 0 {
		b.RecvBatch = batch
	}
	if b.DeleteBatch == 0 {
		b.DeleteBatch = batch
	}
	if b.PriorityMix, err = bench.ParseMix(prio); err != nil {
		return nil, fmt.Errorf("--priority-mix: %w", err)
	}
	if b.DelayMix, err = bench.ParseMix(delay); err != nil {
		return nil, fmt.Errorf("--delay-mix: %w", err)
	}
	switch b.Workload {
	case bench.Produce:
		if !set["consumers"] {
			b.Consumers = 0
		}
	case bench.Publish:
		if set["queues"] {
			return nil, errors.New("publish: give the fan-out with --subs (one queue per subscription), not --queues")
		}
		if subs < 1 || subs > 100 {
			return nil, errors.New("--subs must be 1..100")
		}
		if b.SendBatch != 1 {
			return nil, errors.New("publish: PublishMessage has no batch form: --send-batch must be 1")
		}
		b.Queues = subs
	case bench.Consume:
		if !set["producers"] && b.Messages == 0 {
			b.Producers = 0
		}
	}
	return c, c.validate()
}

func (c *config) validate() error {
	if err := c.checkNumbers(); err != nil {
		return err
	}
	names := []string{"smqd", "inproc"}
	for _, p := range c.peers {
		if p.Name == "" || p.New == nil || slices.Contains(names, p.Name) || p.Name == "mns" {
			return fmt.Errorf("peer %q: a peer needs a name of its own and a constructor", p.Name)
		}
		names = append(names, p.Name)
	}
	if c.target == "mns" {
		c.target = "smqd"
	}
	if !slices.Contains(names, c.target) {
		hint := ""
		if len(c.peers) == 0 {
			hint = " (the peer brokers are targets of bench/peers/cmd/smqbench)"
		}
		return fmt.Errorf("--target must be one of %s, not %q%s", strings.Join(names, ", "), c.target, hint)
	}
	if _, err := wal.ParseSyncMode(c.sync); err != nil {
		return fmt.Errorf("--sync: %w", err)
	}
	switch c.client {
	case "fast", "sdk":
	default:
		return fmt.Errorf("--client must be fast or sdk, not %q", c.client)
	}
	if c.target == "smqd" {
		c.bench.Client = c.client
	} else if c.client != "fast" {
		return errors.New("--client goes with --target smqd")
	}
	if c.serverPIDs != "" {
		for i, f := range strings.Split(c.serverPIDs, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || pid <= 0 {
				return errors.New("--server-pid must be a process id, or several separated by commas")
			}
			if runtime.GOOS == "linux" {
				// A wrong PID left the CPU columns empty with no word
				// (benchmark-honesty audit).
				if _, err := bench.ProcCPU(pid); err != nil {
					return fmt.Errorf("--server-pid %d: %v", pid, err)
				}
			}
			if i == 0 {
				c.bench.ServerPID = pid
			} else {
				c.bench.ServerPIDs = append(c.bench.ServerPIDs, pid)
			}
		}
	}
	if c.spawn != "" && c.bench.ServerPID != 0 {
		return errors.New("--server-pid and --spawn: the spawned smqd is the server")
	}
	if c.bench.RSSPID == 0 {
		c.bench.RSSPID = c.bench.ServerPID
	}
	if c.spawn != "" {
		if c.target != "smqd" {
			return errors.New("--spawn goes with --target smqd")
		}
		if c.dataDir == "" {
			return errors.New("--spawn needs --data-dir")
		}
	}
	if (c.accessKeyID == "") != (c.accessKeySecret == "") {
		return errors.New("--access-key-id and --access-key-secret go together")
	}
	// The durability class in the result: known for what the bench opens
	// or starts; for a server already running (or a peer) only when --sync
	// says it.
	if c.target == "inproc" || c.spawn != "" || c.syncSet {
		c.bench.Sync = c.syncClass()
	}
	return nil
}

// checkNumbers refuses the numeric flags out of their range. bench.Run
// replaced them by its defaults without a word: --consumers 0 ran a cycle
// with 8 consumers (and too few connections for them), --duration -5s ran
// 10 s, --body 8 sent 16-byte bodies and reported 8.
func (c *config) checkNumbers() error {
	b := &c.bench
	w := b.Workload
	switch {
	case b.Producers < 0 || b.Consumers < 0:
		return errors.New("--producers and --consumers must not be negative")
	case b.Producers == 0 && w != bench.Consume:
		return fmt.Errorf("%s needs producers (--producers at least 1)", w)
	case b.Consumers == 0 && (w == bench.Cycle || w == bench.Consume || w == bench.Backlog):
		return fmt.Errorf("%s needs consumers (--consumers at least 1)", w)
	case b.Producers == 0 && b.Messages > 0:
		return errors.New("--messages needs producers (--producers at least 1)")
	case b.BodyBytes < 16:
		return errors.New("--body must be at least 16 (a send timestamp leads the body)")
	case b.Queues < 1:
		return errors.New("--queues must be at least 1")
	case b.Duration <= 0 || b.Warmup < 0:
		return errors.New("--duration must be positive and --warmup not negative")
	case b.Rate < 0 || b.Messages < 0:
		return errors.New("--rate and --messages must not be negative")
	case b.Wait <= 0 || b.MaxTime <= 0:
		return errors.New("--wait and --max-time must be positive")
	case b.MaxErrorPct < 0:
		return errors.New("--max-error-pct must not be negative")
	case b.RestartAfter <= 0 || b.RestartAfter >= 1:
		return errors.New("--restart-after must be between 0 and 1 (a fraction of the preload)")
	case b.SettleTime < 0:
		return errors.New("--settle must not be negative")
	case c.visibility < time.Second:
		return errors.New("--visibility-timeout must be at least 1s")
	}
	return nil
}

func (c *config) syncClass() string {
	if c.inMemory {
		return "memory"
	}
	return c.sync
}

// daemonArgs are the flags of a spawned smqd beyond --listen and --data-dir.
func (c *config) daemonArgs() []string {
	var a []string
	if c.inMemory {
		a = append(a, "--in-memory")
	} else {
		a = append(a, "--sync", c.sync, "--sync-interval", c.syncIvl.String())
	}
	if c.stripes > 0 {
		a = append(a, "--stripes", fmt.Sprint(c.stripes))
	}
	return append(a, strings.Fields(c.spawnArgs)...)
}

// newTarget connects to (or opens) the target.
func (c *config) newTarget(ctx context.Context) (bench.Target, error) {
	workers := c.bench.Producers + c.bench.Consumers
	switch c.target {
	case "inproc":
		opts := engine.Options{Stripes: c.stripes, MaxLongPolls: 100000}
		if !c.inMemory {
			if c.dataDir == "" {
				return nil, errors.New("--target inproc needs --data-dir (or --in-memory)")
			}
			mode, _ := wal.ParseSyncMode(c.sync)
			opts.Dir = c.dataDir
			opts.WAL.Sync = mode
			opts.WAL.SyncInterval = c.syncIvl
		}
		return bench.OpenInproc(opts, c.visibility)
	case "smqd":
		addr := c.addr
		if addr == "" {
			addr = "127.0.0.1:8080"
		}
		id, secret := c.accessKeyID, c.accessKeySecret
		if id == "" {
			path := c.credentialsFile
			if path == "" && c.dataDir != "" {
				path = filepath.Join(c.dataDir, "credentials")
			}
			if path == "" {
				return nil, errors.New("no credentials: give --access-key-id/--access-key-secret (or " + envName("access-key-secret") + "), --credentials-file or --data-dir")
			}
			var err error
			if id, secret, err = bench.ReadCredentials(path); err != nil {
				return nil, fmt.Errorf("credentials: %w", err)
			}
		}
		addrs := []string{addr}
		if c.endpoints != "" {
			addrs = strings.Split(c.endpoints, ",")
		}
		var ts []bench.Target
		for _, a := range addrs {
			opts := bench.MNSOptions{
				Addr: strings.TrimSpace(a), AccessKeyID: id, AccessKeySecret: secret, MaxConns: workers,
				VisibilityTimeout: c.visibility, ContentMD5: c.contentMD5,
			}
			if c.client == "sdk" {
				ts = append(ts, bench.NewSDKTarget(opts))
			} else {
				ts = append(ts, bench.NewMNSTarget(opts))
			}
		}
		if len(ts) == 1 {
			return ts[0], nil
		}
		return bench.NewSpread(ts), nil
	}
	for _, p := range c.peers {
		if p.Name == c.target {
			return p.New(bench.PeerOptions{Addr: orDefault(c.addr, p.DefaultAddr), Workers: workers, VisibilityTimeout: c.visibility})
		}
	}
	return nil, fmt.Errorf("unknown target %q", c.target)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// hostPorts turns a comma-separated list of smqd addresses given as
// host:port or http://host:port[/] into host:port ones; https is refused
// (smqbench speaks plain HTTP).
func hostPorts(list string) (string, error) {
	if list == "" {
		return "", nil
	}
	parts := strings.Split(list, ",")
	for i, a := range parts {
		a = strings.TrimSpace(a)
		if strings.HasPrefix(a, "https://") {
			return "", fmt.Errorf("%s: smqbench speaks plain HTTP to smqd (give host:port)", a)
		}
		a = strings.TrimSuffix(strings.TrimPrefix(a, "http://"), "/")
		if strings.Contains(a, "/") {
			return "", fmt.Errorf("%s: not an address (give host:port)", parts[i])
		}
		parts[i] = a
	}
	return strings.Join(parts, ","), nil
}
