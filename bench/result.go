package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is the outcome of one run. Its JSON field names are stable: runs
// are diffed and aggregated by them (one JSON line per run).
type Result struct {
	Time        string  `json:"time"` // RFC 3339, start of the run
	Label       string  `json:"label,omitempty"`
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	Sync        string  `json:"sync,omitempty"`
	Producers   int     `json:"producers"`
	Consumers   int     `json:"consumers"`
	BodyBytes   int     `json:"body_bytes"`
	SendBatch   int     `json:"send_batch"`
	RecvBatch   int     `json:"recv_batch"`
	DeleteBatch int     `json:"delete_batch"`
	Queues      int     `json:"queues"`
	TargetRate  float64 `json:"target_rate"` // open-loop msgs/s; 0 closed loop
	WarmupS     float64 `json:"warmup_s"`
	WindowS     float64 `json:"window_s"`
	// Client is the client implementation that drove smqd ("fast": the
	// bench's fasthttp client; "sdk": net/http and encoding/xml as the MNS
	// SDKs do); empty for other targets.
	Client string `json:"client,omitempty"`

	// Subscriptions is the publish workload's fan-out: the topic's queue
	// subscriptions (one per queue).
	Subscriptions int `json:"subscriptions,omitempty"`

	// Counts inside the measured window (cycle, produce, consume, publish;
	// for publish, Sent counts publishes and Deleted deliveries).
	Sent          int64   `json:"sent"`
	Received      int64   `json:"received"`
	Deleted       int64   `json:"deleted"`
	Requests      int64   `json:"requests"`
	Errors        int64   `json:"errors"`
	EmptyReceives int64   `json:"empty_receives"`
	SentPerS      float64 `json:"sent_per_s"`
	ReceivedPerS  float64 `json:"received_per_s"`
	DeletedPerS   float64 `json:"deleted_per_s"` // the cycle's throughput: messages fully processed
	MBPerS        float64 `json:"mb_per_s"`      // body bytes deleted (sent for produce) per second
	ErrorPct      float64 `json:"error_pct"`
	ErrorSample   string  `json:"error_sample,omitempty"`

	// CPU over the measured window (cpu.go): the server's (ServerPID: the
	// spawned daemon or --server-pid) and the load generator's own, in
	// seconds, as cores (CPU seconds per wall second; CPUs is the machine's
	// ceiling) and in µs per message deleted (sent, for produce). Zero when
	// not measured (no server process named, or not Linux). For backlog:
	// over the drain (its part before a restart check's kill), per message
	// drained.
	CPUWallS          float64 `json:"cpu_wall_s,omitempty"`
	CPUs              int     `json:"cpus,omitempty"`
	ServerPID         int     `json:"server_pid,omitempty"`
	ServerPIDs        []int   `json:"server_pids,omitempty"` // every server process summed, when several (a cluster)
	ServerCPUS        float64 `json:"server_cpu_s,omitempty"`
	ServerCores       float64 `json:"server_cores,omitempty"`
	ServerCPUUsPerMsg float64 `json:"server_cpu_us_per_msg,omitempty"`
	ClientCPUS        float64 `json:"client_cpu_s,omitempty"`
	ClientCores       float64 `json:"client_cores,omitempty"`
	ClientCPUUsPerMsg float64 `json:"client_cpu_us_per_msg,omitempty"`
	// Publish: the same CPU time per publish (the *PerMsg fields are then
	// per delivery deleted, or per publish without consumers).
	ServerCPUUsPerPublish float64 `json:"server_cpu_us_per_publish,omitempty"`
	ClientCPUUsPerPublish float64 `json:"client_cpu_us_per_publish,omitempty"`

	// ServerLost is the server process named (spawned, or --server-pid)
	// whose CPU could not be measured over the window: it exited or was
	// restarted in it. 0 when measured or when none was named.
	ServerLost int `json:"server_lost_pid,omitempty"`

	// Backlog (Active+Inactive+Delayed, all queues) at the start and end of
	// the window (cycle); BacklogGrew flags growth beyond BacklogTolerance.
	BacklogStart     int64 `json:"backlog_start"`
	BacklogEnd       int64 `json:"backlog_end"`
	BacklogGrowth    int64 `json:"backlog_growth"`
	SentMinusDeleted int64 `json:"sent_minus_deleted"`
	BacklogTolerance int64 `json:"backlog_tolerance"`
	MaxBacklog       int64 `json:"max_backlog"` // producers' flow-control limit (0: none)
	BacklogGrew      bool  `json:"backlog_grew"`
	// RestDiff (cycle): over the whole run, measured once every worker
	// stopped, the backlog's growth minus (sent × fan-out − deleted); at
	// rest, so no request in flight blurs it (the window's figures above
	// are sampled while producers and consumers run, and differ by up to
	// the flow-control limit on a loaded machine). CountsDisagree: it is
	// beyond RestTolerance (the run's failed requests, each of which may
	// or may not have taken effect): messages lost, delivered twice, or
	// deletes the server had not applied when it answered.
	RestDiff       int64 `json:"rest_diff"`
	RestTolerance  int64 `json:"rest_tolerance"`
	CountsDisagree bool  `json:"counts_disagree,omitempty"`

	// Error is why the run failed (empty: it did not). A failed run's
	// figures are kept for inspection; smqbench report leaves them out.
	Error string `json:"error,omitempty"`

	// Latencies: Send per request (from the scheduled time in open loop),
	// Receive per non-empty receive request, Delete per request, E2E per
	// message from its send (scheduled) time to its receive.
	Send    Summary `json:"send"`
	Receive Summary `json:"receive"`
	Delete  Summary `json:"delete"`
	E2E     Summary `json:"e2e"`
	// E2EUnseen (open loop): messages scheduled in the window, acknowledged,
	// and not received within 2 × lateGrace of its end: not in E2E.
	E2EUnseen int64 `json:"e2e_unseen,omitempty"`

	// Backlog workload.
	Preloaded            int64   `json:"preloaded,omitempty"`
	PreloadS             float64 `json:"preload_s,omitempty"`
	PreloadPerS          float64 `json:"preload_per_s,omitempty"`
	Drained              int64   `json:"drained,omitempty"`
	DrainS               float64 `json:"drain_s,omitempty"`
	DrainPerS            float64 `json:"drain_per_s,omitempty"`
	DrainedLate          int64   `json:"drained_late,omitempty"` // restart check: redelivered messages drained after their visibility timeout (not in the rate)
	RSSBytes             int64   `json:"rss_bytes,omitempty"`    // VmRSS after preload
	RSSOf                string  `json:"rss_of,omitempty"`
	RSSAnonBytes         int64   `json:"rss_anon_bytes,omitempty"`    // of RSSBytes: anonymous (heap)
	RSSFileBytes         int64   `json:"rss_file_bytes,omitempty"`    // of RSSBytes: mapped file pages
	RSSSettledBytes      int64   `json:"rss_settled_bytes,omitempty"` // VmRSS once it stops falling after the preload
	RSSSettledS          float64 `json:"rss_settled_s,omitempty"`     // seconds waited for that
	RestartMs            float64 `json:"restart_ms,omitempty"`        // kill -9 to first successful receive
	ExpectedAfterRestart int64   `json:"expected_after_restart,omitempty"`
	CountAfterRestart    int64   `json:"count_after_restart,omitempty"`
	RestartCountOK       bool    `json:"restart_count_ok,omitempty"`
	Redelivered          int64   `json:"redelivered,omitempty"` // counted after restart beyond the expected: acknowledged deletes lost by kill -9 (at-least-once)
	RSSAfterRestartBytes int64   `json:"rss_after_restart_bytes,omitempty"`
}

func (r *runner) newResult() *Result {
	c := &r.cfg
	return &Result{
		Time: time.Now().UTC().Format(time.RFC3339), Label: c.Label, Target: r.t.Name(),
		Workload: string(c.Workload), Sync: c.Sync, Producers: c.Producers, Consumers: c.Consumers,
		BodyBytes: c.BodyBytes, SendBatch: c.SendBatch, RecvBatch: c.RecvBatch, DeleteBatch: c.DeleteBatch,
		Queues: c.Queues, TargetRate: c.Rate, WarmupS: c.Warmup.Seconds(), Client: c.Client,
		Subscriptions: r.subscriptions(),
	}
}

// subscriptions is Result.Subscriptions: the fan-out of a publish run.
func (r *runner) subscriptions() int {
	if r.cfg.Workload == Publish {
		return r.cfg.Queues
	}
	return 0
}

// finish merges the workers' histograms and counters into res.
func (r *runner) finish(res *Result) {
	var hs, hr, hd, he Histogram
	for _, w := range r.all() {
		hs.Merge(&w.hSend)
		hr.Merge(&w.hRecv)
		hd.Merge(&w.hDel)
		he.Merge(&w.hE2E)
		res.Sent += w.wSent
		res.Received += w.wRecv
		res.Deleted += w.wDel
		res.Requests += w.wReq
		res.Errors += w.wErr
		res.EmptyReceives += w.wEmpty
	}
	res.Send, res.Receive, res.Delete, res.E2E = hs.Summary(), hr.Summary(), hd.Summary(), he.Summary()
	res.ErrorSample = r.errSample()
	if res.ErrorSample == "none" {
		res.ErrorSample = ""
	}
	if res.Requests+res.Errors > 0 {
		res.ErrorPct = round2(100 * float64(res.Errors) / float64(res.Requests+res.Errors))
	}
	if res.WindowS > 0 {
		res.SentPerS = round1(float64(res.Sent) / res.WindowS)
		res.ReceivedPerS = round1(float64(res.Received) / res.WindowS)
		res.DeletedPerS = round1(float64(res.Deleted) / res.WindowS)
		moved := res.Deleted
		if r.cfg.Workload == Produce || (r.cfg.Workload == Publish && r.cfg.Consumers == 0) {
			moved = res.Sent
		}
		res.MBPerS = round2(float64(moved) * float64(res.BodyBytes) / res.WindowS / 1e6)
	}
	if r.cfg.Workload == Publish {
		perPublish(res)
	}
	if r.cfg.Workload == Cycle || (r.cfg.Workload == Publish && r.cfg.Consumers > 0) {
		fan := int64(r.fanout())
		res.BacklogGrowth = res.BacklogEnd - res.BacklogStart
		res.SentMinusDeleted = res.Sent*fan - res.Deleted
		tol := r.cfg.BacklogTolerance
		if tol <= 0 {
			inflight := int64(r.cfg.Producers*r.cfg.SendBatch)*fan + int64(2*r.cfg.Consumers*r.cfg.RecvBatch)
			tol = max(res.Sent*fan/100, inflight)
			if res.MaxBacklog > 0 {
				// Held by flow control, the backlog cannot pass the limit
				// and the workers' batches: filling up to it (a window
				// with no warm-up starts empty) is no growth that lasts.
				tol = max(tol, res.MaxBacklog+inflight-res.BacklogStart)
			}
		}
		res.BacklogTolerance = tol
		res.BacklogGrew = res.BacklogGrowth > tol
		res.CountsDisagree = res.RestDiff > res.RestTolerance || -res.RestDiff > res.RestTolerance
	}
	res.PreloadS, res.PreloadPerS = round3(res.PreloadS), round1(res.PreloadPerS)
	res.DrainS, res.DrainPerS = round3(res.DrainS), round1(res.DrainPerS)
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// WriteJSON writes res as one JSON line.
func (res *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes res as a human-readable table.
func (res *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	client := ""
	if res.Client != "" {
		client = "  client=" + res.Client
	}
	p("target", res.Target+client+"  sync="+orDash(res.Sync)+"  workload="+res.Workload+labelSuffix(res.Label))
	p("shape", fmt.Sprintf("%dP/%dC  body %d B  batch send/recv/delete %d/%d/%d  queues %d  rate %s",
		res.Producers, res.Consumers, res.BodyBytes, res.SendBatch, res.RecvBatch, res.DeleteBatch, res.Queues, rateText(res.TargetRate)))
	if res.WindowS > 0 {
		p("window", fmt.Sprintf("%.1f s after %.1f s warm-up", res.WindowS, res.WarmupS))
		if res.Workload == string(Publish) {
			p("throughput", fmt.Sprintf("published %.0f/s to %s  received %.0f/s  deleted %.0f/s  (%.2f MB/s)", res.SentPerS, subsText(res.Subscriptions), res.ReceivedPerS, res.DeletedPerS, res.MBPerS))
		} else {
			p("throughput", fmt.Sprintf("sent %.0f/s  received %.0f/s  deleted %.0f/s  (%.2f MB/s)", res.SentPerS, res.ReceivedPerS, res.DeletedPerS, res.MBPerS))
		}
		p("counts", fmt.Sprintf("sent %d  received %d  deleted %d  requests %d  empty receives %d", res.Sent, res.Received, res.Deleted, res.Requests, res.EmptyReceives))
		if res.CPUWallS > 0 {
			p("cpu", res.cpuText())
		}
	}
	p("errors", fmt.Sprintf("%d (%.2f%%) %s", res.Errors, res.ErrorPct, res.ErrorSample))
	if res.Workload == string(Cycle) || (res.Workload == string(Publish) && res.Consumers > 0) {
		flag := "ok"
		if res.BacklogGrew {
			flag = "GREW (throughput not sustainable)"
		}
		fc := "producers free"
		if res.MaxBacklog > 0 {
			fc = fmt.Sprintf("producers held at %d outstanding", res.MaxBacklog)
		}
		p("backlog", fmt.Sprintf("%d -> %d (growth %d, tolerance %d; %s): %s", res.BacklogStart, res.BacklogEnd, res.BacklogGrowth, res.BacklogTolerance, fc, flag))
		if res.CountsDisagree {
			p("counts", fmt.Sprintf("DISAGREE: at rest after the run, the backlog's growth and sent minus deleted differ by %d, beyond the %d failed requests (messages lost, delivered twice, or deletes not yet applied)", res.RestDiff, res.RestTolerance))
		}
	}
	fmt.Fprintf(tw, "latency (µs)\tcount\tp50\tp90\tp99\tp99.9\tmax\n")
	for _, l := range []struct {
		n string
		s Summary
	}{{"send", res.Send}, {"receive", res.Receive}, {"delete", res.Delete}, {"end-to-end", res.E2E}} {
		if l.s.Count == 0 {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", l.n, l.s.Count, l.s.P50Us, l.s.P90Us, l.s.P99Us, l.s.P999Us, l.s.MaxUs)
	}
	if res.E2EUnseen > 0 {
		p("end-to-end", fmt.Sprintf("%d messages scheduled in the window were acknowledged and not received within %s of its end (not in the percentiles)", res.E2EUnseen, 2*lateGrace))
	}
	if res.Preloaded > 0 {
		p("preload", fmt.Sprintf("%d msgs in %.2f s = %.0f msgs/s", res.Preloaded, res.PreloadS, res.PreloadPerS))
	}
	if res.Preloaded > 0 && res.Workload == string(Backlog) { // consume's drain is its window, above
		p("drain", fmt.Sprintf("%d msgs in %.2f s = %.0f msgs/s", res.Drained, res.DrainS, res.DrainPerS))
		if res.CPUWallS > 0 {
			p("drain cpu", res.cpuText())
		}
		if res.RSSBytes > 0 {
			if res.RSSSettledBytes > 0 {
				p("rss settled", fmt.Sprintf("%.1f MiB (after %.0f s idle)", float64(res.RSSSettledBytes)/(1<<20), res.RSSSettledS))
			}
			p("rss after preload", fmt.Sprintf("%.1f MiB (%s; anon %.1f MiB, file %.1f MiB)", float64(res.RSSBytes)/(1<<20), res.RSSOf,
				float64(res.RSSAnonBytes)/(1<<20), float64(res.RSSFileBytes)/(1<<20)))
		}
	}
	if res.RestartMs > 0 {
		ok := "ok"
		if !res.RestartCountOK {
			ok = "MISMATCH"
		}
		if res.Redelivered > 0 {
			ok = fmt.Sprintf("%d more: deletes acknowledged but not yet written at the kill come back (at-least-once); %d drained after their visibility timeout", res.Redelivered, res.DrainedLate)
		}
		p("restart", fmt.Sprintf("kill -9 to first receive %.1f ms; counted %d, expected %d: %s", res.RestartMs, res.CountAfterRestart, res.ExpectedAfterRestart, ok))
	}
	return tw.Flush()
}

// cpuText is the table's CPU line: each side's cores (of the machine's
// CPUs) and CPU time per message.
func (res *Result) cpuText() string {
	unit := "msg deleted"
	switch {
	case res.Workload == string(Produce):
		unit = "msg sent"
	case res.Workload == string(Publish) && res.Consumers > 0:
		unit = "delivery deleted"
	case res.Workload == string(Publish):
		unit = "publish"
	}
	server := "server not measured (no --spawn or --server-pid)"
	switch {
	case res.ServerPID > 0:
		pids := fmt.Sprintf("pid %d", res.ServerPID)
		if len(res.ServerPIDs) > 1 {
			pids = fmt.Sprintf("%d processes summed, pids %s", len(res.ServerPIDs), strings.Trim(fmt.Sprint(res.ServerPIDs), "[]"))
		}
		server = fmt.Sprintf("server %.2f cores, %.2f µs/%s%s (%s)", res.ServerCores, res.ServerCPUUsPerMsg, unit, perPublishText(res, res.ServerCPUUsPerPublish), pids)
	case res.ServerLost > 0:
		server = fmt.Sprintf("server not measured (pid %d exited or restarted in the window)", res.ServerLost)
	case res.Target == "inproc":
		server = "server: the engine runs in smqbench"
	}
	client := "smqbench not measured"
	if res.ClientCPUS > 0 {
		client = fmt.Sprintf("smqbench %.2f cores, %.2f µs/%s%s", res.ClientCores, res.ClientCPUUsPerMsg, unit, perPublishText(res, res.ClientCPUUsPerPublish))
		if res.Target == "inproc" {
			client += " (the engine included)"
		}
	}
	return fmt.Sprintf("%s;  %s;  of %d CPUs over %.1f s", server, client, res.CPUs, res.CPUWallS)
}

// subsText is "1 subscription", "4 subscriptions".
func subsText(n int) string {
	if n == 1 {
		return "1 subscription"
	}
	return strconv.Itoa(n) + " subscriptions"
}

// perPublishText is ", N µs/publish" for a publish run with consumers
// (without them the per-message figure is per publish already).
func perPublishText(res *Result, us float64) string {
	if res.Workload != string(Publish) || res.Consumers == 0 {
		return ""
	}
	return fmt.Sprintf(", %.2f µs/publish", us)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func labelSuffix(l string) string {
	if l == "" {
		return ""
	}
	return "  label=" + l
}

func rateText(r float64) string {
	if r <= 0 {
		return "closed loop"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + " msgs/s (open loop)"
}

// ReadRSS returns VmRSS in bytes of process pid (0: this process).
func ReadRSS(pid int) (int64, error) { return readStatus(pid, "VmRSS:") }

// ReadRSSParts returns RssAnon and RssFile in bytes of process pid (0:
// this process): anonymous memory (heap) and resident file pages (mapped
// files).
func ReadRSSParts(pid int) (anon, file int64) {
	anon, _ = readStatus(pid, "RssAnon:")
	file, _ = readStatus(pid, "RssFile:")
	return anon, file
}

// readStatus returns a kB field of /proc/<pid>/status in bytes.
func readStatus(pid int, field string) (int64, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}
