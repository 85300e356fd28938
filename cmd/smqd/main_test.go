package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFlagsAndEnv(t *testing.T) {
	var stderr bytes.Buffer
	c, err := parseConfig(nil, env(nil), &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if c.listen != "127.0.0.1:8080" || c.dataDir != "./smqd-data" || c.sync != "always" || c.noAuth || c.logFormat != "text" || c.maxLongPolls != 10000 ||
		c.maxBodyBytes != 2<<20 || c.maxConns != 16384 || c.headerTimeout != 10*time.Second || c.bodyTimeout != time.Minute || c.metricsListen != "" || c.tlsCert != "" {
		t.Fatalf("defaults: %+v", c)
	}
	e := env(map[string]string{
		"SMQD_LISTEN": "0.0.0.0:9000", "SMQD_SYNC": "interval", "SMQD_SYNC_INTERVAL": "5ms",
		"SMQD_NO_AUTH": "true", "SMQD_LOG_FORMAT": "json", "SMQD_MAX_LONG_POLLS": "7", "SMQD_DATA_DIR": "/tmp/x",
	})
	c, err = parseConfig([]string{"--listen", "127.0.0.1:1"}, e, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	// The command line wins over the environment, which wins over defaults.
	if c.listen != "127.0.0.1:1" || c.sync != "interval" || c.syncInterval != 5*time.Millisecond || !c.noAuth || c.logFormat != "json" || c.maxLongPolls != 7 || c.dataDir != "/tmp/x" {
		t.Fatalf("env: %+v", c)
	}
	// A --wal-segment-bytes that versions before 2026-12-06 took is
	// raised, not refused: an upgraded node kept its flags and did not
	// start (review H); the largest message needs 131072 in one record.
	if c, err := parseConfig([]string{"--wal-segment-bytes", "65536"}, env(nil), io.Discard); err != nil || c.walSegmentBytes != 128<<10 || c.walSegmentAsked != 65536 {
		t.Errorf("--wal-segment-bytes 65536: %v, %+v", err, c)
	}
	for _, bad := range [][]string{
		{"--sync", "sometimes"},
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"--access-key-id", "x"},
		{"--max-long-polls", "0"},
		{"--procs", "-1"},
		{"--max-body-bytes", "65536"},
		{"--wal-segment-bytes", "32768"},
		{"--wal-segment-bytes", "200000"},
		{"--max-conns", "0"},
		{"--header-timeout", "0s"},
		{"--tls-cert", "c.pem"},
		{"--cluster-tls-ca", "ca.pem"}, // not a cluster node
		{"--node-id", "1", "--raft-listen", "127.0.0.1:7001", "--cluster-peers", "1=127.0.0.1:7001", "--no-auth",
			"--cluster-tls-cert", "c.pem", "--cluster-tls-key", "k.pem"}, // no --cluster-tls-ca
		{"--metrics-listen", "127.0.0.1:8080"},
		{"extra"},
		{"--nope"},
	} {
		if _, err := parseConfig(bad, env(nil), io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// A value refused that came from the environment names the variable.
	if _, err := parseConfig(nil, env(map[string]string{"SMQD_SYNC": "bogus"}), io.Discard); err == nil || !strings.HasPrefix(err.Error(), `SMQD_SYNC="bogus": --sync must be`) {
		t.Errorf("SMQD_SYNC=bogus: %v, want the variable named", err)
	}
	if _, err := parseConfig([]string{"--sync", "bogus"}, env(map[string]string{"SMQD_SYNC": "always"}), io.Discard); err == nil || !strings.HasPrefix(err.Error(), "--sync must be") {
		t.Errorf("--sync bogus: %v, want the flag named only", err)
	}
	// Errors that name the flag with a colon, and errors about two flags
	// (review N: the variable was not named, or the wrong one was).
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string // the error must start with this
	}{
		{nil, map[string]string{"SMQD_TRUSTED_PROXIES": "bogus"}, `SMQD_TRUSTED_PROXIES="bogus": `},
		{nil, map[string]string{"SMQD_PUSH_ALLOW": "10.0.0.0/33"}, `SMQD_PUSH_ALLOW="10.0.0.0/33": `},
		{[]string{"--node-id", "1", "--raft-listen", "127.0.0.1:7001", "--no-auth"},
			map[string]string{"SMQD_CLUSTER_PEERS": "bogus", "SMQD_CLUSTER_KEY": "0123456789abcdef0123"}, `SMQD_CLUSTER_PEERS="bogus": `},
		{[]string{"--body-timeout", "0s"}, map[string]string{"SMQD_HEADER_TIMEOUT": "5s"}, `--header-timeout and --body-timeout must be positive`},
	} {
		if _, err := parseConfig(tc.args, env(tc.env), io.Discard); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v %v: %v\n\twant it to start with %s", tc.env, tc.args, err, tc.want)
		}
	}
	if _, err := parseConfig([]string{"--node-id", "1", "--raft-listen", "127.0.0.1:7001", "--cluster-peers", "1=127.0.0.1:7001", "--no-auth",
		"--cluster-tls-cert", "c.pem", "--cluster-tls-key", "k.pem"}, env(map[string]string{"SMQD_CLUSTER_KEY": "0123456789abcdef0123"}), io.Discard); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("--cluster-tls-cert and -key without -ca: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{short, filepath.Join(t.TempDir(), "missing.key")} {
		if _, err := parseConfig([]string{"--node-id", "1", "--raft-listen", "127.0.0.1:7001", "--cluster-peers", "1=127.0.0.1:7001", "--no-auth",
			"--cluster-key-accept-file", accept}, env(map[string]string{"SMQD_CLUSTER_KEY": "0123456789abcdef0123"}), io.Discard); err == nil || !strings.Contains(err.Error(), "--cluster-key-accept-file") {
			t.Errorf("--cluster-key-accept-file %s: %v", accept, err)
		}
	}
	if _, err := parseConfig(nil, env(map[string]string{"SMQD_MAX_LONG_POLLS": "many"}), io.Discard); err == nil || !strings.Contains(err.Error(), "SMQD_MAX_LONG_POLLS") {
		t.Errorf("bad env: %v", err)
	}
	// Secrets are masked in the start-up log.
	c, _ = parseConfig([]string{"--access-key-id", "id1", "--access-key-secret", "supersecretvalue"}, env(nil), io.Discard)
	for _, v := range c.logAttrs() {
		if s, ok := v.(string); ok && strings.Contains(s, "supersecretvalue") {
			t.Fatal("secret in the log attributes")
		}
	}
}

// TestStartLogHasEveryFlag: the "starting smqd" line names every flag but
// the cluster's (those go in the "cluster mode" line) and --version, so
// that the docs' "the effective configuration is logged at start" holds
// as flags are added.
func TestStartLogHasEveryFlag(t *testing.T) {
	var help bytes.Buffer
	parseConfig([]string{"-h"}, env(nil), &help)
	var cc clusterConfig
	cfs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	cc.addFlags(cfs)
	c, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	attrs := c.logAttrs()
	for i := 0; i < len(attrs); i += 2 {
		keys[attrs[i].(string)] = true
	}
	n := 0
	for _, line := range strings.Split(help.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "-") || strings.HasPrefix(line, "\t") {
			continue
		}
		name := strings.TrimLeft(f[0], "-")
		if cfs.Lookup(name) != nil || name == "version" || name == "h" {
			continue
		}
		n++
		if key := strings.ReplaceAll(name, "-", "_"); !keys[key] {
			t.Errorf("--%s is not in the start-up log line (want the key %s)", name, key)
		}
	}
	if n < 30 {
		t.Fatalf("only %d flags found in the help:\n%s", n, help.String())
	}
}

// The start-up log line says a secret is set and shows nothing of it (it
// showed its first two characters).
func TestStartLogMasksTheSecret(t *testing.T) {
	c, err := parseConfig([]string{"--access-key-id", "AKTEST"}, env(map[string]string{"SMQD_ACCESS_KEY_SECRET": "SuperSecretValue123456"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	attrs := c.logAttrs()
	for i := 0; i+1 < len(attrs); i += 2 {
		if attrs[i] == "access_key_secret" {
			if v := fmt.Sprint(attrs[i+1]); v != "********" {
				t.Fatalf("access_key_secret=%q in the start-up log, want ******** (set, nothing of it shown)", v)
			}
			return
		}
	}
	t.Fatal("no access_key_secret in the start-up log")
}

// TestGoProcs: one P beyond the CPUs for a log flushed at every
// acknowledgement, Go's own count otherwise, --procs when given.
func TestGoProcs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 3},
		{[]string{"--sync", "interval"}, 0},
		{[]string{"--sync", "none"}, 0},
		{[]string{"--in-memory"}, 0},
		{[]string{"--procs", "5"}, 5},
		{[]string{"--procs", "1", "--sync", "interval"}, 1},
	} {
		c, err := parseConfig(tc.args, env(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.goProcs(2); got != tc.want {
			t.Errorf("%v on 2 CPUs: GOMAXPROCS %d, want %d", tc.args, got, tc.want)
		}
	}
	// A cluster node keeps Go's count.
	c, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.cluster.peers = "1=127.0.0.1:1"
	if got := c.goProcs(2); got != 0 {
		t.Errorf("a cluster node: GOMAXPROCS %d, want Go's own", got)
	}
}

func TestCredentialsGeneratedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := &config{dataDir: dir}
	m1, src, path, err := resolveCredentials(c)
	if err != nil || src != credGenerated || len(m1) != 1 {
		t.Fatalf("%v %v %v", m1, src, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v %v", st.Mode(), err)
	}
	if dst, _ := os.Stat(dir); dst.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v", dst.Mode())
	}
	for id, secret := range m1 {
		if !strings.HasPrefix(id, "SMQD") || len(id) != 20 || len(secret) != 30 {
			t.Fatalf("key shape %q %q", id, secret)
		}
	}
	m2, src, _, err := resolveCredentials(c)
	if err != nil || src != credReused || len(m2) != 1 {
		t.Fatalf("%v %v", src, err)
	}
	for id := range m1 {
		if m2[id] != m1[id] {
			t.Fatal("the key pair changed between starts")
		}
	}
	// Flags win; an explicit file must exist and parse.
	m3, src, _, _ := resolveCredentials(&config{dataDir: dir, accessKeyID: "a", accessKeySecret: "b"})
	if src != credFlags || m3["a"] != "b" {
		t.Fatal("flags")
	}
	f := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(f, []byte("# comment\n\nk1 s1\nk2   s2\n"), 0o600)
	m4, src, _, err := resolveCredentials(&config{dataDir: dir, credentialsFile: f})
	if err != nil || src != credFile || m4["k1"] != "s1" || m4["k2"] != "s2" {
		t.Fatalf("file: %v %v", m4, err)
	}
	os.WriteFile(f, []byte("only-one-field\n"), 0o600)
	if _, _, _, err := resolveCredentials(&config{dataDir: dir, credentialsFile: f}); err == nil {
		t.Fatal("bad file accepted")
	}
	if _, _, _, err := resolveCredentials(&config{dataDir: dir, credentialsFile: f + ".missing"}); err == nil {
		t.Fatal("missing file accepted")
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon runs the daemon in-process until the returned stop is called.
func startDaemon(t *testing.T, args ...string) (addr string, stdout, stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), env(nil), stdout, stderr, func(a string) { ready <- a })
	}()
	select {
	case addr = <-ready:
	case code := <-done:
		t.Fatalf("daemon exited with %d: %s", code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not start")
	}
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("daemon did not stop")
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return addr, stdout, stderr, stop
}

func signedRequest(t *testing.T, method, url, id, secret string) *http.Response {
	t.Helper()
	return signedRequestBody(t, method, url, "", id, secret)
}

func signedRequestBody(t *testing.T, method, url, body, id, secret string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, url, rd)
	date := time.Now().UTC().Format(http.TimeFormat)
	r.Header.Set("Date", date)
	r.Header.Set("x-mns-version", "2015-06-06")
	ctype := ""
	if body != "" {
		ctype = "text/xml;charset=utf-8"
		r.Header.Set("Content-Type", ctype)
	}
	signMNS(r, ctype, date, id, secret)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Out of the box: auth on, a key pair created in the data directory and
// printed, requests signed with it work, unsigned ones do not; a second
// start reuses the key; SIGINT-style cancellation shuts down cleanly.
func TestDaemonOutOfTheBox(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "smqd-data")
	addr, stdout, stderr, stop := startDaemon(t, "--data-dir", dir)
	creds, err := loadCredentials(filepath.Join(dir, "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	var id, secret string
	for id, secret = range creds {
	}
	out := stdout.String()
	if !strings.Contains(out, "http://"+addr) || !strings.Contains(out, id) || !strings.Contains(out, secret) || !strings.Contains(out, "created now") {
		t.Fatalf("banner:\n%s", out)
	}
	if strings.Contains(stderr.String(), secret) {
		t.Fatal("the secret is in the log")
	}
	resp := signedRequest(t, "PUT", "http://"+addr+"/queues/q1", id, secret)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("signed create: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + addr + "/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("unsigned list: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("healthz %d %q", resp.StatusCode, body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "smqd stopped") {
		t.Fatalf("log:\n%s", stderr.String())
	}

	_, stdout, _, stop = startDaemon(t, "--data-dir", dir)
	// The secret is printed when created only, not at every start.
	if !strings.Contains(stdout.String(), id+" (secret in ") || strings.Contains(stdout.String(), secret) {
		t.Fatalf("second start banner:\n%s", stdout.String())
	}
	stop()
}

func TestDaemonNoAuthWarnsAndShutsDownLongPolls(t *testing.T) {
	addr, _, stderr, stop := startDaemon(t, "--no-auth", "--data-dir", filepath.Join(t.TempDir(), "d"), "--log-format", "json")
	if !strings.Contains(stderr.String(), "AUTHENTICATION IS OFF") {
		t.Fatalf("no loud warning:\n%s", stderr.String())
	}
	req, _ := http.NewRequest("PUT", "http://"+addr+"/queues/q", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	// A long poll in flight is answered promptly by the shutdown.
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/queues/q/messages?waitseconds=30")
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "\nsmqd_long_polls_waiting 1\n") {
			if !strings.Contains(string(b), "\nsmqd_build_info{") {
				t.Errorf("no smqd_build_info in /metrics")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("long poll never waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if status := <-got; status != 404 {
		t.Fatalf("long poll during shutdown: %d", status)
	}
	t.Logf("shutdown with a waiting long poll took %v", time.Since(start))
}

func TestDaemonBadFlags(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--sync", "never"}, env(nil), io.Discard, &stderr, nil); code != 2 {
		t.Fatalf("exit %d", code)
	}
	stderr.Reset()
	cluster := []string{"--no-auth", "--node-id", "1", "--raft-listen", "127.0.0.1:7001", "--cluster-peers", "1=127.0.0.1:7001", "--cluster-flush", "fsync"}
	if code := run(context.Background(), cluster, env(nil), io.Discard, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "--cluster-flush must be shared or file") {
		t.Fatalf("--cluster-flush fsync: exit %d: %s", code, stderr.String())
	}
	// A negative --sync-interval with the default --sync always: a usage
	// error, not a failure at run time after the data directory was made.
	stderr.Reset()
	dir := filepath.Join(t.TempDir(), "never-made")
	if code := run(context.Background(), []string{"--no-auth", "--sync-interval", "-1s", "--data-dir", dir}, env(nil), io.Discard, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "--sync-interval must be positive") {
		t.Fatalf("--sync-interval -1s: exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory of a refused start: %v", err)
	}
	if code := run(context.Background(), []string{"-h"}, env(nil), io.Discard, io.Discard, nil); code != 0 {
		t.Fatalf("-h exit %d", code)
	}
	for _, v := range []string{"--version", "version"} {
		var out strings.Builder
		if code := run(context.Background(), []string{v}, env(nil), &out, io.Discard, nil); code != 0 || !strings.HasPrefix(out.String(), "smqd revision ") {
			t.Errorf("%s: exit %d, %q", v, code, out.String())
		}
	}
	if code := run(context.Background(), []string{"--listen", "256.0.0.1:99999", "--no-auth", "--data-dir", t.TempDir()}, env(nil), io.Discard, io.Discard, nil); code != 1 {
		t.Fatalf("bad listen exit %d", code)
	}
}

// Durable by default: a queue and a message survive a restart (the daemon
// passes --data-dir to the engine and closes it, fsyncing, on shutdown).
func TestDaemonDurableRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr, _, stderr, stop := startDaemon(t, "--data-dir", dir, "--sync", "interval", "--sync-interval", "5ms")
	creds, err := loadCredentials(filepath.Join(dir, "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	var id, secret string
	for id, secret = range creds {
	}
	resp := signedRequest(t, "PUT", "http://"+addr+"/queues/durable", id, secret)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create %d", resp.StatusCode)
	}
	resp = signedRequestBody(t, "POST", "http://"+addr+"/queues/durable/messages", "<Message><MessageBody>kept</MessageBody></Message>", id, secret)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("send %d", resp.StatusCode)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Fatalf("no WAL in the data directory: %v", err)
	}
	addr, _, _, stop = startDaemon(t, "--data-dir", dir)
	resp = signedRequest(t, "GET", "http://"+addr+"/queues/durable/messages", id, secret)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<MessageBody>kept</MessageBody>") {
		t.Fatalf("after restart: %d %s", resp.StatusCode, body)
	}
	stop()
}

// TestDaemonStopsWhenItsIndexCannotBeWritten: a broker whose index can no
// longer be written (here its data directory is deleted under it) made
// Badger retry its last flush for good, and a SIGTERM never ended, past
// --shutdown-timeout (cluster ops audit, 2026-12-06). The close is waited
// for at most --shutdown-timeout, then smqd leaves with an error.
func TestDaemonStopsWhenItsIndexCannotBeWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr, _, stderr, stop := startDaemon(t, "--data-dir", dir, "--shutdown-timeout", "2s", "--no-auth")
	resp, err := http.DefaultClient.Do(mustRequest(t, "PUT", "http://"+addr+"/queues/q", ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i := range 20 {
		resp, err := http.DefaultClient.Do(mustRequest(t, "POST", "http://"+addr+"/queues/q/messages", fmt.Sprintf("<Message><MessageBody>m%d</MessageBody></Message>", i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("send: %d", resp.StatusCode)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if code := stop(); code == 0 { // stop fails the test if it takes 20 s
		t.Fatalf("exit 0 though the broker could not close: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "did not close within --shutdown-timeout") {
		t.Fatalf("no word of the close that timed out:\n%s", stderr.String())
	}
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// shutdownBudget: the steps of a graceful stop fit in --shutdown-timeout
// together (each had the whole timeout before, and a cluster node's stop
// could take 2⅓ times it), the hand-over comes first and the close always
// keeps a share.
func TestShutdownBudgetFitsTheTimeout(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second, 30 * time.Second, 5 * time.Minute} {
		b := shutdownBudget(timeout, now)
		if got := b.stopBy.Sub(now); got != timeout {
			t.Errorf("%v: everything done %v after the signal", timeout, got)
		}
		if b.handOver <= 0 || now.Add(b.handOver).After(b.drainBy) {
			t.Errorf("%v: a hand-over of %v does not end before the drain's deadline (%v)", timeout, b.handOver, b.drainBy.Sub(now))
		}
		if b.closeMin <= 0 || b.drainBy.Add(b.closeMin).After(b.stopBy) {
			t.Errorf("%v: drain until %v, then a close of at least %v, overrun %v", timeout, b.drainBy.Sub(now), b.closeMin, timeout)
		}
	}
}

// --shutdown-delay: after SIGTERM /healthz answers 503 "draining" while
// every request is still served, then the stop goes on (drain audit,
// 2026-12-06: a load balancer had no warning before the listener closed).
func TestDaemonShutdownDelayDrainsFirst(t *testing.T) {
	addr, _, stderr, stop := startDaemon(t, "--no-auth", "--data-dir", filepath.Join(t.TempDir(), "d"), "--shutdown-delay", "3s")
	exited := make(chan int, 1)
	go func() { exited <- stop() }()
	waitDraining(t, "http://"+addr, stderr)
	req, _ := http.NewRequest("PUT", "http://"+addr+"/queues/while-draining", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("a request while draining: %v %v", resp, err)
	}
	resp.Body.Close()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// waitDraining waits, at most 10 s, until the daemon at base answers
// /healthz 503 "draining" (its --shutdown-delay runs), and fails the test
// with its log if /healthz cannot be asked.
func waitDraining(t *testing.T, base string, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatalf("healthz before the delay ended: %v\n%s", err, log.String())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 && strings.HasPrefix(string(b), "draining") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz never said draining: %d %q", resp.StatusCode, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// signMNS signs r as the MNS SDKs do (its Date, x-mns-version and
// Content-Type, ctype, already set).
func signMNS(r *http.Request, ctype, date, id, secret string) {
	mac := hmac.New(sha1.New, []byte(secret))
	io.WriteString(mac, r.Method+"\n\n"+ctype+"\n"+date+"\nx-mns-version:2015-06-06\n"+r.URL.RequestURI())
	r.Header.Set("Authorization", "MNS "+id+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}
