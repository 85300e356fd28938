package main

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What SIGHUP reloads, for the metrics of the last reload.
const (
	fileCredentials = iota
	filePolicies
	fileTLS
	fileClusterTLS
	numReloaded
)

var reloadedNames = [numReloaded]string{"credentials", "policies", "tls", "cluster_tls"}

// reloads records, per file SIGHUP reloads, whether its last load
// succeeded and when one last did (the start counts as a load).
type reloads struct {
	failed [numReloaded]atomic.Bool
	at     [numReloaded]atomic.Int64 // unix seconds of the last successful load; 0: not configured
}

func (r *reloads) loaded(what int, err error) {
	r.failed[what].Store(err != nil)
	if err == nil {
		r.at[what].Store(time.Now().Unix())
	}
}

// collectors are smqd_config_last_reload_successful and
// smqd_config_last_reload_success_timestamp_seconds, one series per file
// this daemon loads.
func (r *reloads) collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for what := range numReloaded {
		if r.at[what].Load() == 0 {
			continue
		}
		labels := prometheus.Labels{"file": reloadedNames[what]}
		out = append(out,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "smqd_config_last_reload_successful",
				Help:        "Whether the last load of the file (at start, or on SIGHUP) succeeded: 1, or 0 while a failed one left the previous contents in force. file: credentials, policies, tls or cluster_tls.",
				ConstLabels: labels,
			}, func() float64 {
				if r.failed[what].Load() {
					return 0
				}
				return 1
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "smqd_config_last_reload_success_timestamp_seconds",
				Help:        "When the file was last loaded successfully (at start, or on SIGHUP), Unix seconds.",
				ConstLabels: labels,
			}, func() float64 { return float64(r.at[what].Load()) }))
	}
	return out
}
