// Package version says what a binary was built from: the VCS revision,
// its commit time and whether the tree had changes, as Go stamps them
// into a binary built in a git checkout (`go build`, `make build`), and
// the Go version. It is the same for smqd and smqctl, so that an operator
// can tell which build each node of a cluster runs during a rolling
// upgrade (docs/operations.md, "Upgrading").
package version

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is what a binary was built from.
type Info struct {
	Revision string // the VCS revision, "" when the build has none (go test, go run outside a checkout)
	Time     string // the revision's commit time (RFC 3339), ""
	Modified bool   // the tree had uncommitted changes
	Go       string // the Go version
}

// Get returns this binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Go: "unknown"}
	}
	in := Info{Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	if in.Revision == "" && gitRevision != "" {
		in.Revision, in.Time, in.Modified = gitRevision, gitTime, gitModified == "true"
	}
	return in
}

// Set by make build with -X where Go stamps no revision itself (a git
// worktree, whose .git is a file): the revision, its commit time and
// "true" if the tree had changes.
var gitRevision, gitTime, gitModified string

// Short is the revision's first 12 characters, "+changes" when the tree
// was modified; "unknown" without a revision.
func (in Info) Short() string {
	if in.Revision == "" {
		return "unknown"
	}
	r := in.Revision[:min(12, len(in.Revision))]
	if in.Modified {
		r += "+changes"
	}
	return r
}

// String is one line for --version: the short revision, its time and the
// Go version.
func (in Info) String() string {
	if in.Time == "" {
		return fmt.Sprintf("revision %s, %s", in.Short(), in.Go)
	}
	return fmt.Sprintf("revision %s (%s), %s", in.Short(), in.Time, in.Go)
}

// Collector is the metric smqd_build_info: 1, with the build's revision,
// commit time, modified flag and Go version as labels (the Prometheus
// convention for build information).
func Collector() prometheus.Collector {
	in := Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "smqd_build_info",
		Help: "1, labelled with what this smqd was built from: VCS revision (unknown without one), its commit time, whether the tree was modified, the Go version.",
		ConstLabels: prometheus.Labels{"revision": in.Short(), "vcs_time": in.Time,
			"modified": fmt.Sprint(in.Modified), "go_version": in.Go},
	}, func() float64 { return 1 })
}
