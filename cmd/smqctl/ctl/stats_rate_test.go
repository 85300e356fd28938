package ctl

import "testing"

// A queue's series moves with its shard's lead from one member's /metrics
// to another's, and each member's count starts where its replica did: a
// difference of sums over the members went negative at each move (cluster
// ops audit, 2026-12-06: -749.8 msgs/s with no traffic). Rates come from
// each member's own series, in both samples; a series that went down was
// reset; a member that was not read costs only its own series.
func TestStatsRatesFollowEachMembersSeries(t *testing.T) {
	at := func(ctr map[string]map[string]counters) *sample { return &sample{ctr: ctr} }
	sent := func(c counters) float64 { return c.sent }
	for _, tc := range []struct {
		name       string
		prev, cur  map[string]map[string]counters
		want       float64
		wantNoRate bool
	}{
		{"the lead moved to a member that started later, no traffic",
			map[string]map[string]counters{"a": {"q": {sent: 900}}, "b": {}},
			map[string]map[string]counters{"a": {}, "b": {"q": {sent: 150}}}, 0, true},
		{"the lead stayed; 20 sent",
			map[string]map[string]counters{"a": {"q": {sent: 900}}},
			map[string]map[string]counters{"a": {"q": {sent: 920}}}, 10, false},
		{"the member restarted (its series reset): 30 since",
			map[string]map[string]counters{"a": {"q": {sent: 900}}},
			map[string]map[string]counters{"a": {"q": {sent: 30}}}, 15, false},
		{"a member not read this time: the others still count",
			map[string]map[string]counters{"a": {"q": {sent: 900}}, "b": {"r": {sent: 5}}},
			map[string]map[string]counters{"a": {"q": {sent: 904}}}, 2, false},
	} {
		got := queueRate(at(tc.prev), at(tc.cur), "q", 2, sent)
		switch {
		case tc.wantNoRate && got != nil:
			t.Errorf("%s: rate %v, want none", tc.name, *got)
		case !tc.wantNoRate && (got == nil || *got != tc.want):
			t.Errorf("%s: rate %v, want %v", tc.name, got, tc.want)
		}
	}
}
