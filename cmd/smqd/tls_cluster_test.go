package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/smqd/smqd/engine/cluster/chaos"
)

// Three daemons with --cluster-tls-*: the cluster forms, a message sent
// through one node is received through another (Raft and forwarding over
// TLS), /metrics shows when the certificate expires, and SIGHUP reloads
// it. The engine's tests
// (engine/cluster/tls_test.go) show the encryption and the refusals.
func TestDaemonClusterTLS(t *testing.T) {
	bin, err := buildDaemon(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	const keyID, secret = "tlsnodes", "tls-between-nodes-secret-0123456789"
	if err := os.WriteFile(creds, []byte(keyID+" "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, pairs, err := chaos.WriteTestPKI(dir, time.Hour, "node1", "node2", "node3")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	raft, api, peers := clusterAddrs(t, n)
	nodes := make([]*clusterDaemon, n)
	for i := range n {
		p := pairs[fmt.Sprint("node", i+1)]
		nodes[i] = startClusterDaemon(t, bin, i+1, raft[i], api[i], peers, creds, "--shards", "2",
			"--cluster-tls-cert", p[0], "--cluster-tls-key", p[1], "--cluster-tls-ca", ca)
	}
	waitCluster(t, "the cluster settles", 60*time.Second, func() error { return preferredLeadersReady(api) })
	do := signedDo(t, keyID, secret)
	for k := range 4 { // queues on both shards, each led by one node: forwarded from the others
		q := fmt.Sprintf("tls-%d", k)
		if st, body := do("PUT", "http://"+api[k%n]+"/queues/"+q, ""); st != 201 {
			t.Fatalf("create %s: %d %s", q, st, body)
		}
		if st, body := do("POST", "http://"+api[(k+1)%n]+"/queues/"+q+"/messages", "<Message><MessageBody>over TLS</MessageBody></Message>"); st != 201 {
			t.Fatalf("send to %s: %d %s", q, st, body)
		}
		st, body := do("GET", "http://"+api[(k+2)%n]+"/queues/"+q+"/messages?waitseconds=1", "")
		if st != 200 || !strings.Contains(body, "over TLS") {
			t.Fatalf("receive from %s: %d %s", q, st, body)
		}
	}
	// The certificate's expiry on /metrics (an hour from now, as issued).
	var notAfter float64
	for _, line := range strings.Split(httpGet(t, "http://"+api[0]+"/metrics"), "\n") {
		if strings.HasPrefix(line, `smqd_tls_certificate_expiry_timestamp_seconds{listener="cluster"}`) {
			fmt.Sscan(strings.Fields(line)[1], &notAfter)
		}
	}
	if d := time.Until(time.Unix(int64(notAfter), 0)); d < 50*time.Minute || d > 70*time.Minute {
		t.Errorf("smqd_tls_certificate_expiry_timestamp_seconds{listener=\"cluster\"} %v: %v from now, want about an hour", notAfter, d)
	}
	if !strings.Contains(nodes[0].stderr.String(), "tls=true") {
		t.Errorf("node 1 does not log TLS between nodes:\n%s", tail(nodes[0].stderr.String(), 2000))
	}
	nodes[0].cmd.Process.Signal(syscall.SIGHUP)
	waitCluster(t, "node 1 reloads its cluster certificate", 10*time.Second, func() error {
		if !strings.Contains(nodes[0].stderr.String(), "cluster TLS certificate reloaded") {
			return fmt.Errorf("not logged")
		}
		return nil
	})
	for _, d := range nodes {
		d.stop(t)
	}
}

// The expiry gauge follows the certificate in use, across a reload (the
// API's certificate here; the cluster's goes through the same reloader).
func TestCertExpiryGauge(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile, 1) // valid for a day
	r, err := newCertReloader(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	g := r.expiryGauge("api")
	day := time.Until(time.Unix(int64(gaugeValue(t, g)), 0))
	if day < 23*time.Hour || day > 25*time.Hour {
		t.Fatalf("expiry %v from now, want about a day", day)
	}
	_, pairs, err := chaos.WriteTestPKI(dir, time.Hour, "short")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pairs["short"][0], certFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pairs["short"][1], keyFile); err != nil {
		t.Fatal(err)
	}
	r.reload()
	if hour := time.Until(time.Unix(int64(gaugeValue(t, g)), 0)); hour < 50*time.Minute || hour > 70*time.Minute {
		t.Fatalf("after the reload, expiry %v from now, want about an hour", hour)
	}
}

// gaugeValue reads a GaugeFunc.
func gaugeValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
