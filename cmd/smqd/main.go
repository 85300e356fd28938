// Command smqd is the smqd daemon: an Alibaba Cloud Simple Message Queue
// (MNS) compatible broker. Run "smqd -h" for the flags; every flag has an
// SMQD_* environment variable.
//
// Out of the box it listens on 127.0.0.1:8080 with authentication on; with
// no credentials given it creates a key pair in <data-dir>/credentials on
// first start (0600), reuses it later, and prints the endpoint and the key
// so that clients can connect. Its files are private: the umask is 077 and
// the data directory 0700 (perms.go). With --tls-cert/--tls-key it serves
// HTTPS, and SIGHUP loads the pair again (and the credentials file and
// --policy-file, the access keys and their policies). SIGINT or SIGTERM shut it down
// gracefully: stop accepting, answer waiting long polls, finish requests
// in flight, then close the broker (which flushes and fsyncs its log).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/smqd/smqd/cmd/internal/version"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/server"
	"github.com/smqd/smqd/server/access"
	"github.com/smqd/smqd/wal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run is the daemon; it returns the exit status. ctx ends on a shutdown
// signal. ready, if not nil, is called with the listening address (tests).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(addr string)) int {
	if len(args) > 0 && args[0] == "restore" {
		return runRestore(args[1:], getenv, os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "policy" {
		return runPolicy(args[1:], stdout, stderr)
	}
	if len(args) == 1 && (args[0] == "version" || args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(stdout, "smqd", version.Get())
		return 0
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "smqd:", err)
		return 2
	}
	// SIGHUP is caught before the start's first line: its default action
	// ends the process, and a start can take seconds (a log to replay, a
	// cluster node's shards), in which a reload (a certificate renewed, a
	// service manager's reload) killed it with no line logged (shutdown
	// audit, 2026-12-07). One that arrives meanwhile is handled once the
	// daemon serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	level, _ := parseLevel(cfg.logLevel)
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if cfg.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(h)
	log.Info("starting smqd", append([]any{"version", version.Get().Short()}, cfg.logAttrs()...)...)
	if old, ok := privateUmask(); ok && old != 0o077 {
		log.Info("umask set to 077: every file smqd creates is private", "previous", fmt.Sprintf("%#o", old))
	}
	if err := serve(ctx, cfg, log, stdout, hup, ready); err != nil {
		log.Error("smqd failed", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg *config, log *slog.Logger, stdout io.Writer, hup <-chan os.Signal, ready func(string)) error {
	// The data directory exists, 0700, before anything is written to it
	// (the credentials below, the engine's files).
	generatedKeys := !cfg.noAuth && cfg.accessKeyID == "" && cfg.credentialsFile == ""
	if !cfg.inMemory || generatedKeys {
		if err := ensureDataDir(cfg.dataDir, log); err != nil {
			return err
		}
	}
	var creds map[string]string
	var src credSource
	var credPath string
	if cfg.walSegmentAsked != 0 {
		log.Warn("--wal-segment-bytes is below 131072, which the largest message needs in one record: raised to 131072", "asked", cfg.walSegmentAsked)
	}
	if cfg.noAuth {
		log.Warn("AUTHENTICATION IS OFF (--no-auth): anyone who can reach " + cfg.listen + " can read, send and delete messages. Use this for local development only.")
	} else {
		var err error
		creds, src, credPath, err = resolveCredentials(cfg)
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		if credPath != "" {
			warnIfShared(log, credPath, "credentials file")
		}
	}
	var policies *access.Set
	if cfg.policyFile != "" {
		var err error
		if policies, err = loadPolicies(cfg.policyFile, creds, log); err != nil {
			return err
		}
	}
	var certs *certReloader
	if cfg.tlsCert != "" {
		var err error
		if certs, err = newCertReloader(cfg.tlsCert, cfg.tlsKey, log); err != nil {
			return err
		}
		warnIfShared(log, cfg.tlsKey, "TLS key")
	}
	// Client connections, the log's and the index's files and (in a
	// cluster) the links between nodes share the open-file limit: at it,
	// the log cannot open its next segment (sends fail until the broker
	// reopens) and new connections wait (scale audit, 2026-12-06).
	reserve := uint64(fileReserve) + uint64(cfg.push.maxConns)
	if cfg.clustered() {
		// Each other member: forward connections both ways, and more
		// members than --cluster-peers names may join (at least two).
		reserve += clusterFileReserve * uint64(max(2, strings.Count(cfg.cluster.peers, ",")))
	}
	if lim := openFileLimit(); lim > 0 && lim < uint64(cfg.maxConns)+reserve {
		log.Warn("the open-file limit is below --max-conns plus what storage, pushes (--push-max-conns) and the cluster's links need: at it, sends fail and new connections wait; raise it (LimitNOFILE=) or lower --max-conns",
			"limit", lim, "max_conns", cfg.maxConns, "reserve", reserve)
	}
	if cfg.maxConns <= cfg.maxLongPolls {
		log.Warn("--max-conns is not above --max-long-polls: waiting long polls can hold every connection", "max_conns", cfg.maxConns, "max_long_polls", cfg.maxLongPolls)
	}

	// Listen before the broker opens: a cluster node tells the others the
	// address actually bound (--listen may say port 0).
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	eopts := engine.Options{
		Stripes:      cfg.stripes,
		MaxLongPolls: cfg.maxLongPolls,
		Logger:       log.With("component", "engine"),
	}
	if cfg.inMemory {
		log.Warn("storage is in memory (--in-memory): queues and messages are lost when smqd stops")
	} else {
		mode, err := wal.ParseSyncMode(cfg.sync)
		if err != nil {
			ln.Close()
			return err
		}
		eopts.Dir = cfg.dataDir
		eopts.WAL.Sync = mode
		eopts.WAL.SyncInterval = cfg.syncInterval
		eopts.WAL.Repair = cfg.walRepair
		eopts.WAL.SegmentBytes = cfg.walSegmentBytes
		eopts.Index.MemTableBytes = cfg.memtableBytes
		eopts.FreeSpaceReserve = cfg.freeReserve
	}
	if os.Getenv("GOGC") == "" && cfg.gcPercent > 0 {
		debug.SetGCPercent(cfg.gcPercent)
	}
	if os.Getenv("GOMAXPROCS") == "" { // when set, it wins
		runtime.SetDefaultGOMAXPROCS() // the CPUs Go finds (cgroup limits included), whatever an earlier run set
		if procs := cfg.goProcs(runtime.GOMAXPROCS(0)); procs > 0 {
			log.Info("Go Ps set", "gomaxprocs", procs, "cpus", runtime.GOMAXPROCS(0))
			runtime.GOMAXPROCS(procs)
		}
	}
	if cfg.pprofListen != "" {
		stop, err := startPprof(cfg.pprofListen, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	var pushSigner *server.PushSigner
	// Every node signs the pushes of the shards it leads with its own key,
	// and names its own address for the certificate.
	if pushSigner, err = cfg.push.signer(cfg); err != nil {
		ln.Close()
		return err
	}
	if cfg.push.keyFile != "" {
		warnIfShared(log, cfg.push.keyFile, "push signing key") // as every other key (TLS audit)
	}
	eopts.Push = cfg.push.options(pushSigner, ln.Addr().String(), certs != nil, log)
	var broker backend
	var node *cluster.Node
	var clusterCerts *certReloader // --cluster-tls-cert, reloaded on SIGHUP
	if cfg.clustered() {
		node, clusterCerts, err = startClusterNode(cfg, eopts, ln.Addr().String(), log)
		broker = node
	} else {
		broker, err = engine.Open(eopts)
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("open broker: %w", err)
	}
	sopts := server.Options{
		Credentials:         creds,
		NoAuth:              cfg.noAuth,
		Policies:            policies,
		TrustedProxies:      cfg.proxies,
		ProxyProtocol:       cfg.proxyProtocol,
		MaxRequestBodyBytes: cfg.maxBodyBytes,
		MaxConns:            cfg.maxConns,
		HeaderTimeout:       cfg.headerTimeout,
		ReadTimeout:         cfg.bodyTimeout,
		SeparateMetrics:     cfg.metricsListen != "",
		MetricsPerQueue:     cfg.metricsPerQueue,
		Console:             cfg.console,
		PushSigner:          pushSigner,
		BackupFiles:         backupFiles,
		Logger:              log.With("component", "server"),
	}
	if certs != nil {
		sopts.TLS = certs.config()
		sopts.Collectors = append(sopts.Collectors, certs.expiryGauge("api"))
	}
	if clusterCerts != nil {
		sopts.Collectors = append(sopts.Collectors, clusterCerts.expiryGauge("cluster"))
	}
	var rl reloads // what SIGHUP reloads; the start is the first load
	for what, on := range [numReloaded]bool{credPath != "", cfg.policyFile != "", certs != nil, clusterCerts != nil} {
		if on {
			rl.loaded(what, nil)
		}
	}
	sopts.Collectors = append(sopts.Collectors, rl.collectors()...)
	sopts.Collectors = append(sopts.Collectors, version.Collector())
	var srv *server.Server
	if node != nil {
		sopts.ClusterLeaderWait = cfg.cluster.leaderWait
		srv, err = server.NewCluster(node, sopts)
	} else {
		// After a failed write or fsync of the log the server closes the
		// broker and opens it again, as a restart would (server/reopen.go).
		sopts.Reopen = func() (*engine.Broker, error) { return engine.Open(eopts) }
		srv, err = server.New(broker.(*engine.Broker), sopts)
	}
	if err != nil {
		ln.Close()
		broker.Close()
		return err
	}
	if node == nil {
		broker = servedBroker{srv} // the one the server holds now
	}
	var mln net.Listener
	if cfg.metricsListen != "" {
		if mln, err = net.Listen("tcp", cfg.metricsListen); err != nil {
			ln.Close()
			broker.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
	}
	addr := ln.Addr().String()
	if certs == nil && !isLoopback(ln.Addr()) {
		log.Warn("serving plain HTTP on a non-loopback address: signatures and message bodies cross the network in clear text; serve HTTPS with --tls-cert/--tls-key or put a TLS proxy in front", "addr", addr)
	}
	printBanner(stdout, addr, mln, cfg, creds, src, credPath)
	if ready != nil {
		ready(addr)
	}

	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	if mln != nil {
		go func() { served <- srv.ServeMetrics(mln) }()
	}
	running := 1 + btoi(mln != nil)
	trimCtx, stopTrim := context.WithCancel(context.Background())
	defer stopTrim()
	go trimWhenIdle(trimCtx, activity(srv.Requests, node), broker.ReleaseMemory, time.Second)
	var serveErr error
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down: stop accepting, answer long polls, drain requests")
			break wait
		case serveErr = <-served:
			running--
			log.Error("listener failed", "err", serveErr)
			break wait
		case <-hup:
			if certs == nil && clusterCerts == nil && cfg.policyFile == "" && credPath == "" {
				log.Info("SIGHUP: nothing to reload (keys from flags, and no --tls-cert, --cluster-tls-cert or --policy-file)")
				continue
			}
			if credPath != "" {
				var err error
				creds, err = rereadCredentials(credPath, creds, srv, log)
				rl.loaded(fileCredentials, err)
			}
			if cfg.policyFile != "" {
				rl.loaded(filePolicies, reloadPolicies(cfg.policyFile, creds, srv, log))
			}
			if certs != nil {
				rl.loaded(fileTLS, certs.reload())
			}
			if clusterCerts != nil {
				rl.loaded(fileClusterTLS, clusterCerts.reload())
			}
		}
	}
	timeout := cfg.shutdownTimeout
	if cfg.shutdownDelay > 0 && serveErr == nil {
		// Load balancers see /healthz 503 and stop sending new
		// connections; everything is still served meanwhile.
		srv.Drain()
		log.Info("draining: /healthz answers 503 for --shutdown-delay, then the stop goes on", "delay", cfg.shutdownDelay)
		time.Sleep(cfg.shutdownDelay)
		timeout -= cfg.shutdownDelay
	}
	b := shutdownBudget(timeout, time.Now())
	if node != nil && serveErr == nil {
		// Hand every shard this node leads to another member while the
		// API still serves (and forwards): the others need no election
		// timeout to replace it, and no client request fails.
		hctx, hcancel := context.WithTimeout(context.Background(), b.handOver)
		start := time.Now()
		err := node.HandOverLeads(hctx)
		hcancel()
		if err != nil {
			log.Warn("shutting down without handing every lead over: the others elect new leaders", "err", err, "took", time.Since(start))
		} else {
			log.Info("every lead handed over", "took", time.Since(start))
		}
	}
	sctx, cancel := context.WithDeadline(context.Background(), b.drainBy)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if errors.Is(shutErr, context.DeadlineExceeded) {
		// A client that holds its request past the drain's deadline (a
		// body still arriving, a slow reader, a backup download) has its
		// connection cut: that is the deadline's purpose, not a failure of
		// the stop, which goes on to close the broker. Exit 1 is kept for
		// a stop that did not finish (metrics3 audit, 2026-12-07).
		log.Warn("requests still in flight at the drain deadline (three quarters of --shutdown-timeout) were cut off: their clients got no answer", "timeout", cfg.shutdownTimeout)
		shutErr = nil
	}
	for ; running > 0; running-- {
		if err := <-served; serveErr == nil {
			serveErr = err
		}
	}
	closeErr := closeWithin(broker.Close, max(time.Until(b.stopBy), b.closeMin))
	if errors.Is(closeErr, errCloseTimedOut) {
		log.Error("the broker did not close within --shutdown-timeout (its index or log could not be written?): leaving anyway; the next start replays the log", "timeout", cfg.shutdownTimeout)
	}
	log.Info("smqd stopped")
	return errors.Join(serveErr, shutErr, closeErr)
}

// fileReserve is the open files smqd wants beyond --max-conns: the log's
// segments and the index's tables; a cluster node adds clusterFileReserve
// per other member for its links and its forward connections (up to 2,048
// to each other node that leads, and as many from each).
const (
	fileReserve        = 1024
	clusterFileReserve = 4096
)

var errCloseTimedOut = errors.New("the broker did not close in time")

// stopBudget splits --shutdown-timeout over a graceful stop's steps, so
// that the whole stop takes at most the timeout (a service manager's
// stop timeout can be set from it): before, the hand-over, the requests'
// drain and the broker's close were each bounded on their own, and a stop
// could take a third more than twice the timeout.
type stopBudget struct {
	handOver time.Duration // a cluster node's hand-over of its leads
	drainBy  time.Time     // requests in flight finish by then
	closeMin time.Duration // the broker's close gets at least this
	stopBy   time.Time     // everything is done by then
}

func shutdownBudget(timeout time.Duration, now time.Time) stopBudget {
	return stopBudget{
		handOver: min(10*time.Second, timeout/3),
		drainBy:  now.Add(timeout - timeout/4),
		closeMin: timeout / 4,
		stopBy:   now.Add(timeout),
	}
}

// closeWithin runs close and waits for it at most d. The close flushes
// and syncs the log first, then writes the index's last checkpoint; an
// index that cannot be written (a failing disk, a directory deleted under
// it) makes Badger retry its flush for good, and SIGTERM never ended
// (cluster ops audit, 2026-12-06). What the close did not finish, the next
// start replays from the log.
func closeWithin(close func() error, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errCloseTimedOut
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isLoopback reports whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// printBanner tells a user how to connect: the endpoint, and the key pair
// when the data directory's credentials file was created now; when it is
// reused, the id and where the secret is (a secret printed at every start
// went into journald or a container's log each time; TLS audit). Keys
// given by flag, environment or file are not echoed.
func printBanner(w io.Writer, addr string, mln net.Listener, cfg *config, creds map[string]string, src credSource, path string) {
	scheme := "http"
	if cfg.tlsCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(w, "smqd is serving the MNS queue API\n  endpoint:          %s://%s\n", scheme, addr)
	switch {
	case cfg.noAuth:
		fmt.Fprintf(w, "  authentication:    OFF (--no-auth)\n")
	case src == credGenerated:
		for id, secret := range creds {
			fmt.Fprintf(w, "  access key id:     %s\n  access key secret: %s\n", id, secret)
		}
		fmt.Fprintf(w, "  (key pair created now: %s; printed this once)\n", path)
	case src == credReused:
		for id := range creds {
			fmt.Fprintf(w, "  access key id:     %s (secret in %s)\n", id, path)
		}
	case src == credFile:
		fmt.Fprintf(w, "  access keys:       %d from %s\n", len(creds), path)
	default:
		for id := range creds {
			fmt.Fprintf(w, "  access key id:     %s (secret as configured)\n", id)
		}
	}
	metrics := scheme + "://" + addr + "/metrics"
	if mln != nil {
		metrics = "http://" + mln.Addr().String() + "/metrics"
	}
	fmt.Fprintf(w, "  health, metrics:   %s://%s/healthz, %s (not signed)\n", scheme, addr, metrics)
	if cfg.console {
		fmt.Fprintf(w, "  web console:       %s://%s/console/ (sign in with an access key)\n", scheme, addr)
	}
}
