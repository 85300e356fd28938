package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/smqd/smqd/cmd/internal/envflag"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server"
)

// config is the daemon's effective configuration: flags, each overridable
// by an environment variable (a flag given on the command line wins over
// the environment, which wins over the default).
type config struct {
	listen          string
	dataDir         string
	inMemory        bool
	sync            string
	syncInterval    time.Duration
	walRepair       bool
	walSegmentBytes int64
	walSegmentAsked int64 // a --wal-segment-bytes below 131072 that an older version took, raised (validate)
	memtableBytes   int64
	freeReserve     int64
	pprofListen     string
	gcPercent       int
	procs           int
	accessKeyID     string
	accessKeySecret string
	credentialsFile string
	policyFile      string
	trustedProxies  string
	proxyProtocol   bool
	proxies         []netip.Prefix // trustedProxies, parsed by validate
	noAuth          bool
	logLevel        string
	logFormat       string
	maxLongPolls    int
	maxBodyBytes    int
	maxConns        int
	headerTimeout   time.Duration
	bodyTimeout     time.Duration
	metricsListen   string
	metricsPerQueue string
	console         bool
	tlsCert         string
	tlsKey          string
	stripes         int
	shutdownTimeout time.Duration
	shutdownDelay   time.Duration
	cluster         clusterConfig // cluster.go
	push            pushConfig    // push.go
}

// maxProcs bounds --procs well below Go's 10,000 threads.
const maxProcs = 1024

// minBodyBytes is the smallest request body cap server.Options accepts.
const minBodyBytes = engine.MaxMessageBytes + 4096

// envPrefix + upper-cased flag name with '-' → '_' is the variable of a flag.
const envPrefix = "SMQD_"

func envName(flagName string) string { return envflag.Name(envPrefix, flagName) }

// parseConfig parses args (without the program name) and the environment.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("smqd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to serve the MNS API and /healthz on (and /metrics, unless --metrics-listen is set)")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "serve /metrics (and /healthz) on this address instead of --listen, plain HTTP and unauthenticated: bind it where only operators reach (off when empty: /metrics is on --listen)")
	fs.StringVar(&c.metricsPerQueue, "metrics-per-queue", server.DefaultMetricsPerQueue, "per-queue series on /metrics: all | top:N (the N queues with the largest backlog) | off; the totals always count every queue")
	fs.BoolVar(&c.console, "console", true, "serve the web console at /console/ on --listen (it signs every API call with the access key its user signs in with)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate chain: serve HTTPS on --listen (with --tls-key; both re-read on SIGHUP)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert (keep it 0600)")
	fs.StringVar(&c.dataDir, "data-dir", "./smqd-data", "data directory: the write-ahead log (wal/), the index (index/) and the generated credentials file")
	fs.BoolVar(&c.inMemory, "in-memory", false, "keep queues and messages in memory only (lost at exit); the data directory then holds only the credentials")
	fs.StringVar(&c.sync, "sync", "always", "durability of sends: always (ack after fsync) | interval (ack after write, fsync every --sync-interval) | none (fsync on segment roll and shutdown)")
	fs.DurationVar(&c.syncInterval, "sync-interval", time.Second, "fsync period for --sync interval")
	fs.BoolVar(&c.walRepair, "wal-repair", false, "at start, skip damaged log records instead of refusing to start: every valid record after the damage is kept, and each lost message is logged and listed in <data-dir>/repair-<time>.json")
	fs.Int64Var(&c.walSegmentBytes, "wal-segment-bytes", 64<<20, "size of each write-ahead log segment file (a multiple of 4096, at least 65536; below 131072, which the largest message sent, with its properties, needs as a dead letter, it is raised to that with a warning)")
	fs.Int64Var(&c.memtableBytes, "index-memtable-bytes", 8<<20, "size of one index (Badger) memtable; the index keeps a few, and its free-space reserve scales with it; in cluster mode the node's budget, split among its shards (at least 2 MiB each)")
	fs.Int64Var(&c.freeReserve, "free-space-reserve", 0, "free bytes below which new messages and queues are refused (503 DiskFull) while receives and deletes go on; 0 sizes it from the segment and memtable sizes (docs/operations.md), negative turns the guard off")
	fs.StringVar(&c.accessKeyID, "access-key-id", "", "access key id (with --access-key-secret)")
	fs.StringVar(&c.accessKeySecret, "access-key-secret", "", "access key secret (prefer the environment variable "+envName("access-key-secret")+")")
	fs.StringVar(&c.credentialsFile, "credentials-file", "", "file of access keys, one \"<id> <secret>\" per line (default: <data-dir>/credentials, created on first start)")
	fs.StringVar(&c.policyFile, "policy-file", "", "JSON file of access policies: what each access key may do (docs/operations.md, \"Access policies\"); re-read on SIGHUP. Unset: every key may do everything")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", "", "comma-separated addresses or CIDR prefixes of reverse proxies (load balancers) whose X-Forwarded-For names the client, for acs:SourceIp conditions and the audit log, and whose X-Forwarded-Proto (or PROXY v2 SSL TLV) says whether the client used TLS, for acs:SecureTransport (docs/operations.md, \"Behind a proxy\"). Unset: the TCP peer is the client")
	fs.BoolVar(&c.proxyProtocol, "proxy-protocol", false, "connections from --trusted-proxies start with a PROXY protocol header (v1 or v2) naming the client, as a TCP load balancer sends it; one without it is closed")
	fs.BoolVar(&c.noAuth, "no-auth", false, "accept unsigned requests (local development only)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug | info | warn | error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text | json")
	fs.IntVar(&c.maxLongPolls, "max-long-polls", 10000, "receives that may wait at once; beyond, a long poll answers 404 MessageNotExist")
	fs.IntVar(&c.maxBodyBytes, "max-body-bytes", server.DefaultMaxRequestBodyBytes, "request body cap in bytes (the default fits the API's largest request, a 16-message batch)")
	fs.IntVar(&c.maxConns, "max-conns", server.DefaultMaxConns, "connections held open at once on --listen (waiting long polls count); at the cap new connections wait in the kernel's backlog")
	fs.DurationVar(&c.headerTimeout, "header-timeout", 10*time.Second, "time allowed to send a request's headers (from its first byte); a refused body is drained within it too")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", 60*time.Second, "time allowed to send the rest of a request's body once its headers are authenticated")
	fs.IntVar(&c.stripes, "stripes", 4, "lock stripes of a new queue")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 0, "on SIGTERM, first answer /healthz 503 (\"draining\") for this long while serving every request as usual, so that load balancers stop sending new connections before the listener closes; part of --shutdown-timeout (at most half of it)")
	fs.IntVar(&c.gcPercent, "gc-percent", 25, "Go GC target (as GOGC): the heap is mostly long-lived, pointer-free message metadata that costs the collector nothing to keep, so a low target keeps resident memory near the live data at little CPU; the GOGC environment variable, when set, wins")
	fs.IntVar(&c.procs, "procs", 0, "Go Ps (as GOMAXPROCS); 0: the CPUs available, plus one on a single node with --sync always, whose log writer spends most of its time blocked in fdatasync while the runtime still counts its P as busy (docs/benchmarks.md, \"One more P\"); the GOMAXPROCS environment variable, when set, wins")
	c.cluster.addFlags(fs)
	c.push.flags(fs)
	fs.StringVar(&c.pprofListen, "pprof-listen", "", "serve Go's net/http/pprof profiles on this address (off when empty; never expose it: it is not authenticated)")
	usage := func() {
		fmt.Fprintf(stderr, "Usage: smqd [flags]\n       smqd --version   (the git revision it was built from)\n       smqd restore --from FILE --data-dir DIR   (a backup from smqctl backup; smqd restore --help)\n       smqd policy check --policy-file FILE [--key ID --action A --resource R]   (smqd policy check --help)\n\nEvery flag can also be set by an environment variable, e.g. --listen by %s.\n\nFlags:\n", envName("listen"))
		fs.PrintDefaults()
	}
	// The flag package prints the error and the whole usage (125 lines)
	// on a bad flag: the one line that says what is wrong scrolled away.
	// The usage is printed for -h only; run prints the error once.
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		usage()
	}
	if err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	onCmdline := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCmdline[f.Name] = true })
	set, err := envflag.Apply(fs, envPrefix, getenv)
	if err != nil {
		return nil, err
	}
	c.cluster.keyEnv = getenv(clusterKeyEnv)
	if err := c.validate(); err != nil {
		return c, namesVariable(err, fs, onCmdline, set)
	}
	return c, nil
}

// namesVariable adds the environment variable to a validation error that
// names a flag ("--sync must be ...") set by that variable only: the
// operator set no such flag (docs audit).
func namesVariable(err error, fs *flag.FlagSet, onCmdline, set map[string]bool) error {
	msg := err.Error()
	if !strings.HasPrefix(msg, "--") {
		return err
	}
	// Every flag the message names: the first is the one to blame, unless
	// another one it names came from the command line ("--a and --b go
	// together").
	var names []string
	for _, w := range strings.Fields(msg) {
		if n, ok := strings.CutPrefix(strings.TrimRight(w, ":,.;)"), "--"); ok && fs.Lookup(n) != nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 || !strings.HasPrefix(msg, "--"+names[0]) {
		return err
	}
	name := names[0]
	f := fs.Lookup(name)
	if onCmdline[name] || !set[name] {
		return err
	}
	for _, n := range names[1:] {
		if onCmdline[n] {
			return err
		}
	}
	return fmt.Errorf("%s=%q: %w", envName(name), f.Value.String(), err)
}

func (c *config) validate() error {
	switch c.sync {
	case "always", "interval", "none":
	default:
		return fmt.Errorf("--sync must be always, interval or none, not %q", c.sync)
	}
	// Whatever --sync says: the log checks it at open, and a negative one
	// failed there, after the data directory was made (docs audit).
	if c.syncInterval < 0 || c.sync == "interval" && c.syncInterval == 0 {
		return errors.New("--sync-interval must be positive")
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return err
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	if c.noAuth && c.policyFile != "" {
		return errors.New("--policy-file needs authentication: not with --no-auth")
	}
	proxies, err := parseProxies(c.trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	c.proxies = proxies
	if c.proxyProtocol && len(proxies) == 0 {
		return errors.New("--proxy-protocol needs --trusted-proxies: the balancers whose connections start with the header")
	}
	if (c.accessKeyID == "") != (c.accessKeySecret == "") {
		return errors.New("--access-key-id and --access-key-secret go together")
	}
	if c.accessKeyID != "" {
		// An id no request can sign with (a ':' ends it in "MNS
		// <id>:<signature>") failed at run time, exit 1, naming no flag.
		if err := (server.Options{Credentials: map[string]string{c.accessKeyID: c.accessKeySecret}}).Validate(); err != nil {
			return fmt.Errorf("--access-key-id %q: %w", c.accessKeyID, err)
		}
	}
	if c.procs < 0 || c.procs > maxProcs {
		// 100000 Ps started a GC worker thread each and the process died
		// of thread exhaustion (Go allows 10,000 threads; flags audit).
		return fmt.Errorf("--procs must be 0 (automatic) or between 1 and %d", maxProcs)
	}
	if c.gcPercent <= 0 {
		// 0 and negative values were logged as set and ignored: the
		// collector ran at Go's 100, not 25 (flags audit). GOGC, which
		// wins, can still turn it off.
		return errors.New("--gc-percent must be positive (GOGC=off, which wins, turns the collector off)")
	}
	if c.maxLongPolls <= 0 {
		return errors.New("--max-long-polls must be positive")
	}
	if c.maxBodyBytes < minBodyBytes {
		return fmt.Errorf("--max-body-bytes must be at least %d (one maximal message and its markup)", minBodyBytes)
	}
	if c.maxConns <= 0 {
		return errors.New("--max-conns must be positive")
	}
	if c.headerTimeout <= 0 || c.bodyTimeout <= 0 {
		return errors.New("--header-timeout and --body-timeout must be positive")
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.metricsListen != "" && c.metricsListen == c.listen && !strings.HasSuffix(c.listen, ":0") {
		return errors.New("--metrics-listen must differ from --listen")
	}
	if err := c.validateSizes(); err != nil {
		return err
	}
	if err := (server.Options{NoAuth: true, MetricsPerQueue: c.metricsPerQueue}).Validate(); err != nil {
		return fmt.Errorf("--metrics-per-queue must be all, off or top:N with N >= 1, not %q", c.metricsPerQueue)
	}
	if c.stripes <= 0 || c.stripes > 256 {
		return errors.New("--stripes must be between 1 and 256")
	}
	if c.shutdownTimeout <= 0 {
		return errors.New("--shutdown-timeout must be positive")
	}
	if c.shutdownDelay < 0 || c.shutdownDelay > c.shutdownTimeout/2 {
		return fmt.Errorf("--shutdown-delay must be between 0 and half of --shutdown-timeout (%s), not %s", c.shutdownTimeout, c.shutdownDelay)
	}
	if c.dataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	if err := c.push.validate(); err != nil {
		return err
	}
	return c.validateCluster()
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	// The four names only: slog also takes offsets ("error+8"), and one
	// above error silenced even "smqd failed" (flags audit).
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
	default:
		return 0, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", s)
	}
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", s)
	}
	return l, nil
}

// logAttrs is the effective configuration for the start-up log line, with
// the secret masked.
func (c *config) logAttrs() []any {
	secret := ""
	if c.accessKeySecret != "" {
		secret = "********" // set; nothing of it shown
	}
	return []any{
		"listen", c.listen,
		"data_dir", c.dataDir,
		"in_memory", c.inMemory,
		"sync", c.sync,
		"sync_interval", c.syncInterval,
		"wal_repair", c.walRepair,
		"wal_segment_bytes", c.walSegmentBytes,
		"index_memtable_bytes", c.memtableBytes,
		"free_space_reserve", c.freeReserve,
		"pprof_listen", c.pprofListen,
		"gc_percent", c.gcPercent,
		"procs", c.procs,
		"access_key_id", c.accessKeyID,
		"access_key_secret", secret,
		"credentials_file", c.credentialsFile,
		"policy_file", c.policyFile,
		"trusted_proxies", c.trustedProxies,
		"proxy_protocol", c.proxyProtocol,
		"no_auth", c.noAuth,
		"log_level", c.logLevel,
		"log_format", c.logFormat,
		"max_long_polls", c.maxLongPolls,
		"max_body_bytes", c.maxBodyBytes,
		"max_conns", c.maxConns,
		"header_timeout", c.headerTimeout,
		"body_timeout", c.bodyTimeout,
		"metrics_listen", c.metricsListen,
		"metrics_per_queue", c.metricsPerQueue,
		"console", c.console,
		"tls_cert", c.tlsCert,
		"tls_key", c.tlsKey,
		"stripes", c.stripes,
		"shutdown_timeout", c.shutdownTimeout,
		"shutdown_delay", c.shutdownDelay,
		"push_allow", c.push.allow,
		"push_concurrency", c.push.concurrency,
		"push_max_conns", c.push.maxConns,
		"push_timeout", c.push.timeout,
		"push_lease", c.push.lease,
		"push_key_file", c.push.keyFile,
		"push_cert_file", c.push.certFile,
		"push_cert_url", c.push.certURL,
	}
}

// goProcs is the GOMAXPROCS to set (when the GOMAXPROCS environment
// variable is not), or 0 to leave Go's own: --procs; by default a durable
// log flushed at every acknowledgement gets one P beyond the cpus Go
// found. That log's writer is blocked in fdatasync most of the time under
// load (80 % at batch 1), holding a P that the runtime takes back only
// after it has noticed, and a writer back from its flush often finds no
// free P and waits to run the acknowledgements it carries.
func (c *config) goProcs(cpus int) int {
	switch {
	case c.procs > 0:
		return c.procs
	case c.sync == "always" && !c.inMemory && !c.clustered():
		// Not on a cluster node: three nodes on one 2-CPU machine made
		// fewer messages at batch 1 with it (docs/benchmarks.md).
		return cpus + 1
	}
	return 0
}

// parseProxies reads --trusted-proxies: addresses and CIDR prefixes,
// comma-separated.
func parseProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", e)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				// It reaches past the IPv4-mapped addresses; unmapped,
				// it was an invalid prefix that held no address.
				return nil, fmt.Errorf("%q reaches past the IPv4-mapped addresses (::ffff:0:0/96): write the IPv4 prefix", e)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// validateSizes checks the log's segment and the index's memtable sizes
// (smqd restore opens with them too).
func (c *config) validateSizes() error {
	if c.walSegmentBytes < 64<<10 || c.walSegmentBytes%4096 != 0 {
		return errors.New("--wal-segment-bytes must be a multiple of 4096, at least 65536 (and below 131072 it is raised to 131072)")
	}
	if c.walSegmentBytes < 128<<10 {
		// A 64 KiB message with 32 KiB of properties must fit one record
		// as a dead letter: at 65536 one such send failed as a storage
		// failure (embedding audit 2, 2026-12-06; the engine now refuses
		// it, 400). Raised, not refused: versions before took 65536, and a
		// node upgraded with its flags would not start (review H); the
		// log opens segments of any earlier size.
		c.walSegmentAsked, c.walSegmentBytes = c.walSegmentBytes, 128<<10
	}
	if c.memtableBytes < 1<<20 || c.memtableBytes > 1<<30 {
		return errors.New("--index-memtable-bytes must be between 1 MiB and 1 GiB")
	}
	return nil
}
