package bench

// Aggregation of JSON result lines: runs are grouped by label, the shape of
// their load (groupOf) and target (smqd driven by a non-default client is a
// target of its own, "smqd/sdk"), each figure is reduced to its median and
// spread (min..max), and smqd's median is divided by the best peer's median
// of the same label and shape (a peer is every target but smqd, inproc and
// the baseline; "best" is the highest rate or the lowest latency, the first
// peer by name among equals).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// ReadResults reads JSON result lines (other lines are skipped).
func ReadResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return out, fmt.Errorf("bad result line %q: %w", line, err)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Figure is a median and spread over repeated runs.
type Figure struct {
	N                int
	Median, Min, Max float64
}

func figureOf(xs []float64) Figure {
	if len(xs) == 0 {
		return Figure{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Figure{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1]}
}

func (f Figure) String() string {
	if f.N == 0 {
		return "-"
	}
	if f.N == 1 {
		return num(f.Median)
	}
	return fmt.Sprintf("%s (%s..%s)", num(f.Median), num(f.Min), num(f.Max))
}

func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// metric is one figure a report shows.
type metric struct {
	name        string
	higherWins  bool
	get         func(*Result) float64
	appliesToWL func(string) bool
	skipZero    bool // 0 means not measured (restart time, RSS of a peer)
	noRatio     bool // no "best" among targets (CPU shares: lower is not better by itself)
}

var reportMetrics = []metric{
	{"deleted/s", true, func(r *Result) float64 { return r.DeletedPerS }, is("cycle", "consume", "publish"), false, false},
	{"sent/s", true, func(r *Result) float64 { return r.SentPerS }, is("cycle", "produce", "publish"), false, false},
	{"send p50 µs", false, func(r *Result) float64 { return r.Send.P50Us }, is("cycle", "produce", "publish"), false, false},
	{"send p99 µs", false, func(r *Result) float64 { return r.Send.P99Us }, is("cycle", "produce", "publish"), false, false},
	{"e2e p50 µs", false, func(r *Result) float64 { return r.E2E.P50Us }, is("cycle", "publish"), false, false},
	{"e2e p99 µs", false, func(r *Result) float64 { return r.E2E.P99Us }, is("cycle", "publish"), false, false},
	{"preload/s", true, func(r *Result) float64 { return r.PreloadPerS }, is("backlog", "consume"), false, false},
	{"drain/s", true, func(r *Result) float64 { return r.DrainPerS }, is("backlog"), false, false},
	{"srv µs/msg", false, func(r *Result) float64 { return r.ServerCPUUsPerMsg }, is("cycle", "produce", "consume", "publish"), true, false},
	{"cli µs/msg", false, func(r *Result) float64 { return r.ClientCPUUsPerMsg }, is("cycle", "produce", "consume", "publish"), true, false},
	{"srv µs/publish", false, func(r *Result) float64 { return r.ServerCPUUsPerPublish }, is("publish"), true, false},
	{"srv cores", false, func(r *Result) float64 { return r.ServerCores }, is("cycle", "produce", "consume", "publish"), true, true},
	{"cli cores", false, func(r *Result) float64 { return r.ClientCores }, is("cycle", "produce", "consume", "publish"), true, true},
	{"RSS MiB", false, func(r *Result) float64 { return float64(r.RSSBytes) / (1 << 20) }, is("backlog"), true, false},
	{"restart ms", false, func(r *Result) float64 { return r.RestartMs }, is("backlog"), true, false},
}

func is(ws ...string) func(string) bool {
	return func(w string) bool {
		for _, x := range ws {
			if x == w {
				return true
			}
		}
		return false
	}
}

// WriteReport writes, per label, every target's figures (median and
// spread) and the ratio of baseline (normally "smqd") to the best peer.
func WriteReport(w io.Writer, results []Result, baseline string) error {
	type key struct{ label, target string }
	groups := map[key][]*Result{}
	failed := map[key]int{} // runs that failed (Result.Error): left out of every figure
	var labels []string
	seen := map[string]bool{}
	for i := range results {
		r := &results[i]
		k := key{groupOf(r), reportTarget(r)}
		if r.Error != "" {
			failed[k]++
			if _, ok := groups[k]; !ok {
				groups[k] = nil
			}
		} else {
			groups[k] = append(groups[k], r)
		}
		if !seen[k.label] {
			seen[k.label] = true
			labels = append(labels, k.label)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, group := range labels {
		label, _, _ := strings.Cut(group, "\x00")
		var targets []string
		for k := range groups {
			if k.label == group {
				targets = append(targets, k.target)
			}
		}
		sort.Slice(targets, func(i, j int) bool {
			return targetOrder(targets[i]) < targetOrder(targets[j]) || targetOrder(targets[i]) == targetOrder(targets[j]) && targets[i] < targets[j]
		})
		var first *Result
		for _, t := range targets {
			if rs := groups[key{group, t}]; len(rs) > 0 {
				first = rs[0]
				break
			}
		}
		if first == nil { // every run of the label failed
			for _, t := range targets {
				fmt.Fprintf(tw, "== %s: %s: %d run(s), all failed\n", orDash(label), t, failed[key{group, t}])
			}
			fmt.Fprintln(tw)
			continue
		}
		wl := first.Workload
		if first.Subscriptions > 0 {
			wl += " to " + subsText(first.Subscriptions)
		}
		fmt.Fprintf(tw, "== %s: %s, %dP/%dC, body %d B, batch %d/%d/%d, rate %s, sync %s\n", orDash(label), wl,
			first.Producers, first.Consumers, first.BodyBytes, first.SendBatch, first.RecvBatch, first.DeleteBatch, rateText(first.TargetRate), orDash(first.Sync))
		var ms []metric
		for _, m := range reportMetrics {
			if m.appliesToWL(first.Workload) {
				ms = append(ms, m)
			}
		}
		fmt.Fprint(tw, "target\truns")
		for _, m := range ms {
			fmt.Fprintf(tw, "\t%s", m.name)
		}
		fmt.Fprint(tw, "\tgrew\terr%\n")
		figs := map[string][]Figure{}
		for _, t := range targets {
			rs := groups[key{group, t}]
			if f := failed[key{group, t}]; f > 0 {
				fmt.Fprintf(tw, "%s\t%d (+%d failed, left out)", t, len(rs), f)
			} else {
				fmt.Fprintf(tw, "%s\t%d", t, len(rs))
			}
			for _, m := range ms {
				var xs []float64
				for _, r := range rs {
					if x := m.get(r); x != 0 || !m.skipZero {
						xs = append(xs, x)
					}
				}
				f := figureOf(xs)
				figs[t] = append(figs[t], f)
				fmt.Fprintf(tw, "\t%s", f)
			}
			grew, errs := 0, 0.0
			for _, r := range rs {
				if r.BacklogGrew {
					grew++
				}
				errs = math.Max(errs, r.ErrorPct)
			}
			fmt.Fprintf(tw, "\t%d\t%.2f\n", grew, errs)
		}
		isPeer := func(t string) bool { return t != baseline && targetOrder(t) == peerOrder }
		if bf, ok := figs[baseline]; ok {
			fmt.Fprintf(tw, "%s / best peer\t", baseline)
			for i, m := range ms {
				best, bestT := math.NaN(), ""
				for _, t := range targets { // in order: a tie names the same peer every time
					f := figs[t]
					if !isPeer(t) || f[i].N == 0 || f[i].Median == 0 {
						continue
					}
					if math.IsNaN(best) || (m.higherWins && f[i].Median > best) || (!m.higherWins && f[i].Median < best) {
						best, bestT = f[i].Median, t
					}
				}
				if math.IsNaN(best) || bf[i].N == 0 || m.noRatio {
					fmt.Fprint(tw, "\t-")
					continue
				}
				fmt.Fprintf(tw, "\t%.2fx (%s)", bf[i].Median/best, bestT)
			}
			fmt.Fprint(tw, "\t\t\n")
			for _, t := range targets {
				if !isPeer(t) {
					continue
				}
				fmt.Fprintf(tw, "%s / %s\t", baseline, t)
				for i, m := range ms {
					if m.noRatio || bf[i].N == 0 || figs[t][i].N == 0 || figs[t][i].Median == 0 {
						fmt.Fprint(tw, "\t-")
						continue
					}
					fmt.Fprintf(tw, "\t%.2fx", bf[i].Median/figs[t][i].Median)
				}
				fmt.Fprint(tw, "\t\t\n")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// groupOf is the group of runs a result is reduced with: its label and
// the shape of its load, so that runs of another workload, batch or
// worker count under the same label (every run without --label) are not
// one median (a produce, a consume and two publish runs made one row).
func groupOf(r *Result) string {
	return fmt.Sprintf("%s\x00%s %d %d %d %d/%d/%d %d %d %g", r.Label, r.Workload, r.Producers, r.Consumers, r.BodyBytes,
		r.SendBatch, r.RecvBatch, r.DeleteBatch, r.Queues, r.Subscriptions, r.TargetRate)
}

// reportTarget is the name a result is grouped under: its target, and for
// smqd driven by another client than the default one, the client too
// ("smqd/sdk"), which is neither the baseline nor a peer.
func reportTarget(r *Result) string {
	if r.Client != "" && r.Client != "fast" {
		return r.Target + "/" + r.Client
	}
	return r.Target
}

// peerOrder is targetOrder's rank of every target but smqd's own.
const peerOrder = 2

// targetOrder ranks smqd first, the engine in process second, then the
// peers.
func targetOrder(t string) int {
	switch t {
	case "smqd":
		return 0
	case "inproc":
		return 1
	}
	if strings.HasPrefix(t, "smqd/") || strings.HasPrefix(t, "inproc/") {
		return 1
	}
	return peerOrder
}
