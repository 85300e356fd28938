package main

// Tests of the claims of docs/operations.md, "Health and metrics", on the
// families the daemon adds (metrics audit, 2026-12-07).

import (
	"crypto/x509"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/smqd/smqd/cmd/internal/version"
)

// gatherOne gathers c alone and returns its one series.
func gatherOne(t *testing.T, c prometheus.Collector) *dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("%d families gathered, want one with one series", len(mfs))
	}
	return mfs[0].GetMetric()[0]
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// smqd_tls_certificate_expiry_timestamp_seconds{listener}: the NotAfter of
// the certificate in use, in Unix seconds; it follows a reload, and a
// reload refused leaves it at the pair still served.
func TestCertificateExpiryGaugeFollowsReloads(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	now, srv := time.Now().Truncate(time.Second), x509.ExtKeyUsageServerAuth
	first := pair(ca.issue(t, dir, "first", now.Add(-time.Hour), now.Add(48*time.Hour), srv))
	second := pair(ca.issue(t, dir, "second", now.Add(-time.Hour), now.Add(90*24*time.Hour), srv))
	expired := pair(ca.issue(t, dir, "expired", now.Add(-2*time.Hour), now.Add(-time.Hour), srv))
	live := [2]string{filepath.Join(dir, "live.pem"), filepath.Join(dir, "live-key.pem")}
	replacePair(t, live, first)
	r, err := newCertReloader(live[0], live[1], slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	g := r.expiryGauge("api")
	check := func(what string, want time.Time) {
		t.Helper()
		m := gatherOne(t, g)
		if l := labelMap(m); l["listener"] != "api" || len(l) != 1 {
			t.Errorf("%s: labels %v", what, l)
		}
		if v := m.GetGauge().GetValue(); v != float64(want.Unix()) {
			t.Errorf("%s: %v, want %d (NotAfter in Unix seconds)", what, v, want.Unix())
		}
	}
	check("at start", now.Add(48*time.Hour))
	replacePair(t, live, second)
	if err := r.reload(); err != nil {
		t.Fatal(err)
	}
	check("after a reload", now.Add(90*24*time.Hour))
	replacePair(t, live, expired)
	if err := r.reload(); err == nil {
		t.Fatal("an expired pair reloaded")
	}
	check("after a refused reload", now.Add(90*24*time.Hour))
}

// smqd_build_info: 1, labelled revision (the revision's first 12
// characters, "unknown" without one), vcs_time, modified and go_version.
func TestBuildInfoLabels(t *testing.T) {
	m := gatherOne(t, version.Collector())
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("smqd_build_info %v", v)
	}
	l := labelMap(m)
	for _, name := range []string{"revision", "vcs_time", "modified", "go_version"} {
		if _, ok := l[name]; !ok && name != "vcs_time" {
			t.Errorf("no label %s: %v", name, l)
		}
	}
	in := version.Get()
	bi, _ := debug.ReadBuildInfo()
	if l["go_version"] != bi.GoVersion || l["modified"] != map[bool]string{true: "true", false: "false"}[in.Modified] || l["vcs_time"] != in.Time {
		t.Errorf("labels %v, build %+v", l, in)
	}
	rev := l["revision"]
	if in.Revision == "" && rev != "unknown" {
		t.Errorf("revision %q without a VCS revision, want unknown", rev)
	}
	if in.Revision != "" && !strings.HasPrefix(in.Revision, strings.TrimSuffix(rev, "+changes")) {
		t.Errorf("revision %q for %q", rev, in.Revision)
	}
}
