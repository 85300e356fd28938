package ctl

// stats: a live view of each queue's counts and rates.
//
// Counts come from ListQueue (with meta), signed like every other call.
// Send, receive and delete rates come from smqd's Prometheus counters
// (smqd_queue_{sent,received,deleted}_total) on /metrics, which is not
// signed; when /metrics cannot be read (on another address: give
// --metrics-url, a cluster's members' separated by commas, since their
// --metrics-listen addresses are not in GET /cluster; or the queue is
// beyond --metrics-per-queue's top N), the
// view shows only the backlog's change per second. A cluster node exports
// the series of the queues whose shards it leads, so through a cluster
// node the counters of every member's /metrics are added up (its members'
// API addresses are in GET /cluster). On a terminal the table
// is redrawn in place with ANSI escapes; otherwise each refresh is printed
// after the previous one, as plain text or (--json) one JSON object a line.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// queueRates is one queue's line of the view.
type queueRates struct {
	Name          string   `json:"name"`
	Active        int64    `json:"active"`
	Inactive      int64    `json:"inactive"`
	Delayed       int64    `json:"delayed"`
	BacklogChange *float64 `json:"backlog_change_per_s"`
	Sent          *float64 `json:"sent_per_s"`
	Received      *float64 `json:"received_per_s"`
	Deleted       *float64 `json:"deleted_per_s"`
	// OldestWaiting is smqd_queue_oldest_message_age_seconds: how long the
	// oldest message waiting for a receive has been in the queue.
	OldestWaiting *float64 `json:"oldest_waiting_s"`
}

type counters struct {
	sent, received, deleted float64
	oldest                  *float64 // nil from a server without the gauge
}

type sample struct {
	at      time.Time
	backlog map[string]int64
	ctr     map[string]map[string]counters // per /metrics URL, per queue; nil without /metrics
}

// queueRate is the rate of one counter of queue q between two samples:
// the sum, over the servers whose series of q is in both, of its increase
// (a series that went down was reset: its value is the increase). A
// queue's series moves with its shard's lead, so a difference of sums over
// the servers went negative at each move (cluster ops audit, 2026-12-06:
// -749.8 msgs/s at a lead move with no traffic); nil where no server has
// the series in both.
func queueRate(prev, cur *sample, q string, dt float64, get func(counters) float64) *float64 {
	var sum float64
	found := false
	for u, cs := range cur.ctr {
		cc, ok1 := cs[q]
		pc, ok2 := prev.ctr[u][q]
		if !ok1 || !ok2 {
			continue
		}
		d := get(cc) - get(pc)
		if d < 0 {
			d = get(cc)
		}
		sum, found = sum+d, true
	}
	if !found {
		return nil
	}
	return rate(sum, dt)
}

// oldestOf is the largest age of q's oldest waiting message over servers.
func oldestOf(s *sample, q string) *float64 {
	var out *float64
	for _, cs := range s.ctr {
		if v := cs[q].oldest; v != nil && (out == nil || *v > *out) {
			out = v
		}
	}
	return out
}

func (r *run) stats(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("stats [QUEUE...] [flags]", flag.ContinueOnError)
	interval := new(time.Duration)
	durationVar(fs, interval, "interval", 2*time.Second, "time between refreshes")
	count := fs.Int("count", -1, "refreshes before exiting (default: until interrupted on a terminal, 1 otherwise; rates need 2)")
	prefix := fs.String("prefix", "", "only queues whose name starts with this")
	metricsURL := fs.String("metrics-url", "", "where smqd serves /metrics, for send, receive and delete rates; a cluster's members' separated by commas (default: the endpoint's /metrics, and every member's at its API address)")
	pos, err := r.parse(fs, args, 0, -1)
	if err != nil {
		return err
	}
	if *interval < 100*time.Millisecond {
		return usagef("stats: --interval must be at least 100ms")
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "count" })
	if set && *count < 0 {
		return usagef("stats: --count must be at least 0 (0: until interrupted)")
	}
	n := *count
	if n < 0 {
		n = 1
		if r.env.TTY && !r.g.json {
			n = 0
		}
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	var murls []string
	for u := range strings.SplitSeq(*metricsURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			murls = append(murls, u)
		}
	}
	if len(murls) == 0 {
		murls = []string{c.base + "/metrics"}
		rctx, cancel := r.reqCtx(ctx, 0)
		if us := clusterMetricsURLs(rctx, c); len(us) > 0 {
			murls = us
		}
		cancel()
	}
	want := map[string]bool{}
	for _, q := range pos {
		want[q] = true
	}
	var prev *sample
	lines := 0
	warned := false
	for i := 0; n == 0 || i < n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(*interval):
			}
		}
		rctx, cancel := r.reqCtx(ctx, 0)
		qs, err := c.listQueues(rctx, *prefix)
		var ctr map[string]map[string]counters
		var merr error
		if err == nil {
			ctr, merr = readAllCounters(rctx, c, murls)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if merr != nil && !warned && !r.g.json {
			if ctr == nil {
				fmt.Fprintf(r.env.Stderr, "smqctl: no send/receive/delete rates (%v); showing the backlog's change\n", merr)
			} else {
				fmt.Fprintf(r.env.Stderr, "smqctl: rates from the members that answered only (%v)\n", merr)
			}
			warned = true
		}
		cur := &sample{at: time.Now(), backlog: map[string]int64{}, ctr: ctr}
		var rows []queueRates
		for _, q := range qs {
			if len(want) > 0 && !want[q.Name] {
				continue
			}
			b := q.ActiveMessages + q.InactiveMessages + q.DelayMessages
			cur.backlog[q.Name] = b
			row := queueRates{Name: q.Name, Active: q.ActiveMessages, Inactive: q.InactiveMessages, Delayed: q.DelayMessages}
			if prev != nil {
				dt := cur.at.Sub(prev.at).Seconds()
				if pb, ok := prev.backlog[q.Name]; ok {
					row.BacklogChange = rate(float64(b-pb), dt)
				}
				row.Sent = queueRate(prev, cur, q.Name, dt, func(c counters) float64 { return c.sent })
				row.Received = queueRate(prev, cur, q.Name, dt, func(c counters) float64 { return c.received })
				row.Deleted = queueRate(prev, cur, q.Name, dt, func(c counters) float64 { return c.deleted })
			}
			row.OldestWaiting = oldestOf(cur, q.Name)
			rows = append(rows, row)
		}
		for q := range want {
			if _, ok := cur.backlog[q]; !ok {
				return &APIError{Status: 404, Code: "QueueNotExist", Message: "no queue " + q}
			}
		}
		prev = cur
		if r.g.json {
			if rows == nil {
				rows = []queueRates{}
			}
			if err := jsonLine(r.env.Stdout, map[string]any{"time": cur.at.UTC().Format(time.RFC3339Nano), "queues": rows}); err != nil {
				return err
			}
			continue
		}
		var buf bytes.Buffer
		renderStats(&buf, cur.at, rows)
		if r.env.TTY && lines > 0 {
			fmt.Fprintf(r.env.Stdout, "\x1b[%dA\x1b[J", lines) // back to the top of the last table, clear below
		} else if i > 0 {
			fmt.Fprintln(r.env.Stdout)
		}
		lines = strings.Count(buf.String(), "\n")
		r.env.Stdout.Write(buf.Bytes())
	}
	return nil
}

func rate(d, dt float64) *float64 {
	if dt <= 0 {
		return nil
	}
	v := d / dt
	return &v
}

func fmtRate(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

func renderStats(w io.Writer, at time.Time, rows []queueRates) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	fmt.Fprintf(w, "%s  %d queue(s)\n", at.Format("15:04:05"), len(rows))
	t := [][]string{{"QUEUE", "ACTIVE", "INACTIVE", "DELAYED", "BACKLOG/s", "SENT/s", "RECEIVED/s", "DELETED/s", "OLDEST"}}
	for _, q := range rows {
		oldest := "-"
		if q.OldestWaiting != nil {
			oldest = (time.Duration(*q.OldestWaiting) * time.Second).String()
		}
		t = append(t, []string{q.Name, itoa(q.Active), itoa(q.Inactive), itoa(q.Delayed), fmtRate(q.BacklogChange), fmtRate(q.Sent), fmtRate(q.Received), fmtRate(q.Deleted), oldest})
	}
	r := &run{env: Env{Stdout: w}}
	r.table(t)
}

// clusterMetricsURLs returns the /metrics of every member of the cluster
// the endpoint belongs to, nil for a single node (or a server that does
// not say).
func clusterMetricsURLs(ctx context.Context, c *client) []string {
	_, b, err := c.do(ctx, "GET", "/cluster", nil, nil)
	if err != nil {
		return nil
	}
	var st clusterStatus
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	bases := memberBases(c, &st)
	if len(bases) != len(st.Members) {
		return nil // a member whose address is not known yet: this node's series alone
	}
	var out []string
	for _, m := range st.Members {
		out = append(out, bases[m.NodeID]+"/metrics")
	}
	return out
}

// readAllCounters reads the per-queue counters of each of urls (a
// cluster's members: each exports the queues it leads), per URL. One that
// cannot be read is left out, and the first such error returned: the
// rates come from the series read in both samples (queueRate), so a
// member down costs its own series only (before, any one unread left the
// whole cluster without rates).
func readAllCounters(ctx context.Context, c *client, urls []string) (map[string]map[string]counters, error) {
	out := map[string]map[string]counters{}
	var first error
	for _, u := range urls {
		one, err := readCounters(ctx, c, u)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		out[u] = one
	}
	if len(out) == 0 {
		return nil, first
	}
	return out, first
}

// readCounters reads the per-queue counters of smqd's /metrics with the
// Prometheus text parser. A server with no queue series (a cluster node
// leading no shard) gives an empty map.
func readCounters(ctx context.Context, c *client, url string) (map[string]counters, error) {
	body, err := c.metrics(ctx, url)
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	out := map[string]counters{}
	for name, set := range map[string]func(*counters, float64){
		"smqd_queue_sent_total":     func(c *counters, v float64) { c.sent = v },
		"smqd_queue_received_total": func(c *counters, v float64) { c.received = v },
		"smqd_queue_deleted_total":  func(c *counters, v float64) { c.deleted = v },
	} {
		mf := mfs[name]
		if mf == nil {
			if mfs["smqd_queues"] != nil {
				continue // no queue series here (none led, or none yet)
			}
			return nil, fmt.Errorf("%s has no %s", url, name)
		}
		for _, m := range mf.GetMetric() {
			if q := queueLabel(m); q != "" {
				c := out[q]
				set(&c, m.GetCounter().GetValue())
				out[q] = c
			}
		}
	}
	if mf := mfs["smqd_queue_oldest_message_age_seconds"]; mf != nil { // not from servers before 2026-12-06
		for _, m := range mf.GetMetric() {
			if q := queueLabel(m); q != "" {
				c, v := out[q], m.GetGauge().GetValue()
				c.oldest = &v
				out[q] = c
			}
		}
	}
	return out, nil
}

// queueLabel is a series' queue label, "" if it has none.
func queueLabel(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "queue" {
			return l.GetValue()
		}
	}
	return ""
}
