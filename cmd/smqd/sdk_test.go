package main

// Real-client compatibility: the official npm SDKs @alicloud/mns 1.2.0 and
// ali-mns 2.6.8 drive every queue operation they expose against the real
// daemon binary and check every field they get back (the scripts and their
// checks are in testdata/sdk/; spec §9.2-§9.4).
//
// The test
//
//  1. installs the SDKs with `npm ci` into testdata/sdk/node_modules (git-
//     ignored) from the committed package-lock.json, which pins every
//     version; meanwhile it builds the daemon with `go build` into a temp
//     directory (with -race when the test itself runs with -race);
//  2. starts it on 127.0.0.1:0 with a temp data directory in durable mode
//     (--sync always) and authentication on, with the key pair the daemon
//     generates on first start (so every request's signature is checked);
//  3. runs four scripts in parallel against it: @alicloud/mns through its
//     endpoint option, ali-mns through HTTP_PROXY (absolute-form request
//     targets), ali-mns with its computed URLs overwritten, and limits.js
//     (bodies over the cap, unauthenticated bodies, Content-MD5 mismatches,
//     through both SDKs and Node's own http client); the two SDK scripts
//     also subscribe HTTP receivers they run on 127.0.0.1 (inside the
//     default --push-allow) and check every push smqd makes to them, the
//     RSA-SHA1 signature verified with the certificate smqd serves
//     (testdata/sdk/push.js; topic spec §3.4-§3.6);
//  4. checks /metrics saw the WAL at work, then stops the daemon with
//     SIGTERM and requires a clean exit (and no race report);
//  5. runs the SDK scripts against a 3-node cluster of the same binary,
//     each through another node, so that most requests are forwarded to
//     their shard's leader, every step included (topics, pushes and
//     dead-letter queues; the scripts allow what a cluster does otherwise
//     by design: sdk_cluster_test.go), and stops every node with SIGTERM;
//  6. starts it again with --tls-cert/--tls-key (a self-signed certificate
//     the test creates, trusted by Node through NODE_EXTRA_CA_CERTS) and
//     runs @alicloud/mns, ali-mns (URLs overwritten) and limits.js over
//     https; then replaces the certificate files, sends SIGHUP and waits
//     for the new certificate to be served, and stops the daemon.
//
// Node.js and npm are required: without them the test fails, it never
// skips. npm ci needs the npm registry (or a warm npm cache).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const sdkDir = "testdata/sdk"

func TestSDKCompatibility(t *testing.T) {
	node, npm := requireNode(t)
	dir, err := filepath.Abs(sdkDir)
	if err != nil {
		t.Fatal(err)
	}

	// npm ci and go build run at the same time.
	var wg sync.WaitGroup
	var npmErr error
	var npmOut []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		npmOut, npmErr = npmCI(npm, dir)
	}()
	bin, buildErr := buildDaemon(t.TempDir())
	wg.Wait()
	if npmErr != nil {
		t.Fatalf("npm ci in %s failed (it needs the npm registry or a warm npm cache): %v\n%s", dir, npmErr, npmOut)
	}
	if buildErr != nil {
		t.Fatalf("go build of the daemon: %v", buildErr)
	}

	d := startBinary(t, bin)
	base := nodeEnv()
	common := append(base[:len(base):len(base)],
		"SMQD_ENDPOINT="+d.endpoint,
		"SMQD_ACCESS_KEY_ID="+d.keyID,
		"SMQD_ACCESS_KEY_SECRET="+d.secret,
	)
	runs := []nodeRun{
		{"alicloud-mns", "alicloud-mns.js", nil},
		{"ali-mns-http-proxy", "ali-mns.js", []string{"SMQD_ALIMNS_MODE=proxy", "HTTP_PROXY=" + d.endpoint}},
		{"ali-mns-url-override", "ali-mns.js", []string{"SMQD_ALIMNS_MODE=url"}},
		{"limits", "limits.js", nil},
	}
	t.Run("sdk", func(t *testing.T) { runNodeScripts(t, node, dir, common, runs) })

	// Durable mode: the sends above went through the WAL and were fsynced.
	metrics := httpGet(t, d.endpoint+"/metrics")
	for _, name := range []string{"smqd_wal_fsyncs_total", "smqd_wal_records_total"} {
		if v := metricValue(metrics, name); v <= 0 {
			t.Errorf("%s = %v after the SDK runs, want > 0", name, v)
		}
	}
	d.stop(t)

	// The same SDKs against a 3-node cluster, through every node.
	t.Run("sdk-cluster", func(t *testing.T) { runSDKCluster(t, node, dir, bin) })

	// The same SDKs over HTTPS, then a certificate reload on SIGHUP.
	certDir := t.TempDir()
	certFile, keyFile := filepath.Join(certDir, "cert.pem"), filepath.Join(certDir, "key.pem")
	first := writeSelfSigned(t, certFile, keyFile, 1)
	dt := startBinary(t, bin, "--tls-cert", certFile, "--tls-key", keyFile)
	tlsEnv := append(base[:len(base):len(base)],
		"SMQD_ENDPOINT="+dt.endpoint,
		"SMQD_ACCESS_KEY_ID="+dt.keyID,
		"SMQD_ACCESS_KEY_SECRET="+dt.secret,
		"NODE_EXTRA_CA_CERTS="+certFile,
	)
	t.Run("sdk-tls", func(t *testing.T) {
		runNodeScripts(t, node, dir, tlsEnv, []nodeRun{
			{"alicloud-mns", "alicloud-mns.js", nil},
			{"ali-mns-url-override", "ali-mns.js", []string{"SMQD_ALIMNS_MODE=url"}},
			{"limits", "limits.js", nil},
		})
	})
	addr := strings.TrimPrefix(dt.endpoint, "https://")
	if got := servedSerial(t, addr, first); got != 1 {
		t.Fatalf("serving certificate serial %d, want 1", got)
	}
	second := writeSelfSigned(t, certFile, keyFile, 2)
	if err := dt.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for servedSerial(t, addr, second) != 2 || !strings.Contains(dt.stderr.String(), "TLS certificate reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate was not served (and logged) after SIGHUP:\n%s", dt.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	dt.stop(t)

	// Access policies through a real SDK (sdk_policy_test.go).
	t.Run("sdk-policy", func(t *testing.T) { runSDKPolicy(t, node, dir, bin) })
}

// nodeRun is one SDK script run: a name, the script and extra environment.
type nodeRun struct {
	name, script string
	env          []string
}

// runNodeScripts runs the scripts in parallel subtests.
func runNodeScripts(t *testing.T, node, dir string, common []string, runs []nodeRun) {
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			runNodeScript(t, node, dir, r.script, append(common[:len(common):len(common)], r.env...))
		})
	}
}

// writeSelfSigned writes a self-signed ECDSA certificate for 127.0.0.1
// (serial number serial) and its key, 0600, and returns a pool trusting it.
func writeSelfSigned(t *testing.T, certFile, keyFile string, serial int64) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "smqd test " + strconv.FormatInt(serial, 10)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// Node wants a CA bit on a certificate it trusts as its own root.
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	tmpl.KeyUsage |= x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return pool
}

// servedSerial returns the serial number of the certificate served at
// addr, or -1 when the handshake with a client trusting pool fails.
func servedSerial(t *testing.T, addr string, pool *x509.CertPool) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		return -1
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// requireNode finds node (>= 16) and npm, failing the test with a clear
// message when either is missing.
func requireNode(t *testing.T) (node, npm string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("the SDK compatibility test needs Node.js (>= 16) and npm on PATH: node not found. " +
			"Install them (Debian: apt-get install nodejs npm); this test never skips.")
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		t.Fatal("the SDK compatibility test needs npm on PATH: npm not found. " +
			"Install it (Debian: apt-get install npm); this test never skips.")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if major < 16 {
		t.Fatalf("the SDK compatibility test needs Node.js >= 16, found %s", out)
	}
	return node, npm
}

// npmCI installs the pinned SDKs into dir/node_modules.
func npmCI(npm, dir string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// buildDaemon builds this package's binary into dir.
func buildDaemon(dir string) (string, error) {
	// go test puts the go command that runs it first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command: %v", err)
	}
	bin := filepath.Join(dir, "smqd")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, ".")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
}

// daemon is a running smqd binary.
type daemon struct {
	cmd      *exec.Cmd
	dataDir  string
	endpoint string
	keyID    string
	secret   string
	stderr   *syncBuffer
	done     chan error
	stopOnce sync.Once
	exitErr  error
}

// startBinary starts bin on an ephemeral loopback port with a fresh data
// directory (durable, --sync always, generated credentials) and extra
// flags, and waits for its banner.
func startBinary(t testing.TB, bin string, extra ...string) *daemon {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, append([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--sync", "always"}, extra...)...)
	cmd.Env = daemonEnv()
	orphanProof(cmd)
	d := &daemon{cmd: cmd, dataDir: dataDir, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = d.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		fields := map[string]string{}
		sent := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if k, v, ok := strings.Cut(line, ":"); ok && !sent {
				fields[k] = strings.TrimSpace(v)
			}
			if strings.HasPrefix(line, "health, metrics:") && !sent {
				banner <- fields
				sent = true
			}
		}
		if !sent {
			close(banner)
		}
	}()
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	var fields map[string]string
	select {
	case f, ok := <-banner:
		if !ok {
			t.Fatalf("smqd exited before printing its banner:\n%s", d.stderr.String())
		}
		fields = f
	case <-time.After(30 * time.Second):
		t.Fatalf("smqd printed no banner within 30 s:\n%s", d.stderr.String())
	}
	d.endpoint = fields["endpoint"]
	d.keyID = fields["access key id"]
	d.secret = fields["access key secret"]
	scheme := "http"
	if slices.Contains(extra, "--tls-cert") {
		scheme = "https"
	}
	if !strings.HasPrefix(d.endpoint, scheme+"://127.0.0.1:") || d.keyID == "" || d.secret == "" {
		t.Fatalf("banner without endpoint or generated key: %v", fields)
	}
	creds, err := loadCredentials(filepath.Join(dataDir, defaultCredentialsName))
	if err != nil || creds[d.keyID] != d.secret {
		t.Fatalf("the printed key is not the one in the data directory's credentials file: %v %v", creds, err)
	}
	if scheme == "http" {
		if body := httpGet(t, d.endpoint+"/healthz"); body != "ok" {
			t.Fatalf("healthz: %q", body)
		}
	}
	if !strings.Contains(d.stderr.String(), "sync=always") {
		t.Fatalf("the daemon does not say it runs with --sync always:\n%s", d.stderr.String())
	}
	return d
}

// stop sends SIGTERM and requires a clean exit within 20 s.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	d.stopOnce.Do(func() {
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
		select {
		case d.exitErr = <-d.done:
		case <-time.After(20 * time.Second):
			d.cmd.Process.Kill()
			d.exitErr = <-d.done
			t.Errorf("smqd did not stop within 20 s of SIGTERM")
		}
	})
	log := d.stderr.String()
	if d.exitErr != nil {
		t.Errorf("smqd exit: %v\n%s", d.exitErr, log)
	}
	for _, bad := range []string{"WARNING: DATA RACE", "panic", "level=ERROR"} {
		if strings.Contains(log, bad) {
			t.Errorf("smqd logged %q:\n%s", bad, log)
		}
	}
	if !strings.Contains(log, "smqd stopped") {
		t.Errorf("no clean stop in the log:\n%s", log)
	}
}

// runNodeScript runs one SDK script and fails the test with its report
// when it exits non-zero.
func runNodeScript(t *testing.T, node, dir, script string, env []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start).Round(time.Millisecond)
	report := out.String()
	if err != nil {
		t.Fatalf("%s failed after %v (%v); its report:\n%s", script, elapsed, err, tail(report, 80))
	}
	lines := strings.Split(strings.TrimSpace(report), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "SKIP ") {
			t.Fatalf("%s skipped a step (%s); every run runs every step:\n%s", script, l, tail(report, 40))
		}
	}
	last := lines[len(lines)-1]
	if !strings.Contains(last, "checks passed") {
		t.Fatalf("%s exited 0 without its closing line:\n%s", script, tail(report, 40))
	}
	if testing.Verbose() {
		t.Logf("%s report:\n%s", script, report)
	}
	t.Logf("%s: %s in %v", script, last, elapsed)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// nodeEnv is the environment for the scripts: this process's, without any
// proxy setting (the proxy mode adds its own).
func nodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY":
			continue
		}
		if strings.HasPrefix(k, "SMQD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// daemonEnv is the daemon's environment: no SMQD_* variable of the caller
// may change its configuration.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SMQD_") {
			env = append(env, kv)
		}
	}
	return env
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// metricValue returns the value of an unlabelled sample in Prometheus
// text, or -1 if it is missing.
func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
