// Package cli is smqbench's command line: flags and environment, spawning
// smqd, one run, and the report subcommand. cmd/smqbench runs it with smqd's
// own targets (smqd over HTTP, the engine in process); the peer module's
// smqbench (bench/peers/cmd/smqbench) passes the peer brokers as well, so
// that this module needs none of their client libraries.
//
// Usage:
//
//	smqbench <cycle|produce|consume|backlog|publish> [flags]
//	smqbench report [--baseline smqd] results.jsonl...
//
// Run "smqbench cycle -h" for the flags. Every flag can also be set by an
// environment variable SMQBENCH_<FLAG> (upper case, '-' as '_'), e.g.
// SMQBENCH_ACCESS_KEY_SECRET.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/smqd/smqd/bench"
)

// Run is the whole program: args are the arguments after the program name,
// getenv reads the environment (nil: none), and peers are the --target values beyond
// smqd and inproc. It returns the exit status. Every process it starts is
// stopped before it returns (deferred), on every path.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, peers ...bench.Peer) int {
	if len(args) > 0 && args[0] == "report" {
		return report(args[1:], stdout, stderr)
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	cfg, err := parseConfig(args, getenv, stderr, peers)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "smqbench:", err)
		return 2
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "smqbench:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "smqbench:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	wroteHeap := false
	if cfg.memProfile != "" {
		cfg.bench.AfterPreload = func() {
			writeHeapProfile(cfg.memProfile, stderr)
			wroteHeap = true
		}
	}
	res, err := execute(ctx, cfg, stdout, stderr)
	if cfg.memProfile != "" && !wroteHeap {
		writeHeapProfile(cfg.memProfile, stderr)
	}
	if err == nil && res != nil && res.E2EUnseen > 0 && 100*float64(res.E2EUnseen) > cfg.bench.MaxErrorPct*float64(int64(res.E2E.Count)+res.E2EUnseen) {
		err = fmt.Errorf("%d of the messages scheduled in the window were acknowledged and not received within the grace after its end: over --max-error-pct %g", res.E2EUnseen, cfg.bench.MaxErrorPct)
	}
	if err == nil && res != nil && res.ErrorPct > cfg.bench.MaxErrorPct {
		err = fmt.Errorf("errors were %.2f%% of the window's requests, over --max-error-pct %g: not a clean run (%s)", res.ErrorPct, cfg.bench.MaxErrorPct, res.ErrorSample)
	}
	if err != nil && res != nil {
		res.Error = err.Error() // in the JSON: report leaves the run out
	}
	if res != nil {
		if !cfg.quiet {
			res.WriteTable(stderr)
		}
		res.WriteJSON(stdout)
		if cfg.jsonOut != "" {
			if f, ferr := os.OpenFile(cfg.jsonOut, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
				res.WriteJSON(f)
				f.Close()
			} else {
				fmt.Fprintln(stderr, "smqbench:", ferr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "smqbench:", err)
		return 1
	}
	if res.BacklogGrew {
		fmt.Fprintln(stderr, "smqbench: the backlog grew during the window: the deleted rate is not sustainable")
	}
	if res.CountsDisagree {
		fmt.Fprintln(stderr, "smqbench: at rest after the run, the backlog's growth and sent minus deleted disagree: messages lost, delivered twice, or deletes not applied when acknowledged")
	}
	return 0
}

// execute sets up the target (spawning the daemon when asked), runs the
// workload and tears everything down.
func execute(ctx context.Context, cfg *config, stdout, stderr io.Writer) (*bench.Result, error) {
	var daemon *bench.Daemon
	if cfg.spawn != "" {
		daemon = &bench.Daemon{Bin: cfg.spawn, DataDir: cfg.dataDir, Listen: cfg.spawnListen, Args: cfg.daemonArgs(), LogPath: cfg.daemonLog, Env: strings.Fields(cfg.spawnEnv)}
		if err := daemon.Start(); err != nil {
			return nil, err
		}
		defer func() {
			if err := daemon.Stop(30 * time.Second); err != nil {
				fmt.Fprintln(stderr, "smqbench: stop daemon:", err)
			}
		}()
		if err := daemon.WaitReady(ctx, time.Minute); err != nil {
			return nil, err
		}
		cfg.addr = daemon.Addr()
		fmt.Fprintf(stderr, "smqbench: started %s pid %d on %s (data %s, log %s)\n", cfg.spawn, daemon.PID(), cfg.addr, cfg.dataDir, daemon.LogPath)
	}
	t, err := cfg.newTarget(ctx)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	bc := cfg.bench
	if daemon != nil {
		bc.Daemon = daemon
	}
	if cfg.progress && isTerminal(stdout) {
		bc.Progress = func(p bench.Progress) {
			fmt.Fprintf(stdout, "\r\033[K%-7s %5.1fs  sent %9.0f/s  deleted %9.0f/s  send p99 %8.2fms  e2e p99 %8.2fms  errors %d",
				p.Phase, p.Elapsed.Seconds(), p.SentPerS, p.DeletedPerS,
				float64(p.SendP99)/1e6, float64(p.E2EP99)/1e6, p.Errors)
		}
		defer fmt.Fprint(stdout, "\r\033[K")
	}
	return bench.Run(ctx, t, bc)
}

// writeHeapProfile writes a heap profile (after a GC) to path.
func writeHeapProfile(path string, stderr io.Writer) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(stderr, "smqbench:", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(stderr, "smqbench:", err)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
