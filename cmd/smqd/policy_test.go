package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --policy-file: a key is held to its policy, a key the file does not
// name is refused everything (and warned about at start), SIGHUP loads an
// edited file, and a broken edit leaves the policies in force.
func TestDaemonPolicyFileAndReload(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("admin adminsecret\napp appsecret\nidle idlesecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(dir, "policy.json")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(pol, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"Keys": {"admin": ["AliyunMNSFullAccess"], "app": ["AliyunMNSReadOnlyAccess"], "gone": ["AliyunMNSFullAccess"]}}`)
	addr, _, stderr, _ := startDaemon(t, "--data-dir", filepath.Join(dir, "data"), "--credentials-file", creds, "--policy-file", pol)
	for _, want := range []string{"access keys with no policy", "keys=idle", "names access keys the credentials do not have", "keys=gone", "access policies loaded"} {
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("no %q in the log:\n%s", want, stderr.String())
		}
	}
	status := func(method, path, id string) (int, string) {
		t.Helper()
		resp := signedRequest(t, method, "http://"+addr+path, id, id+"secret")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := status("PUT", "/queues/app-1", "app"); code != http.StatusForbidden || !strings.Contains(body, "<Code>AccessDenied</Code>") {
		t.Fatalf("read-only key creates a queue: %d %s", code, body)
	}
	if code, body := status("GET", "/queues", "idle"); code != http.StatusForbidden {
		t.Fatalf("unnamed key lists queues: %d %s", code, body)
	}
	if code, body := status("GET", "/queues", "app"); code != http.StatusOK {
		t.Fatalf("read-only key cannot list: %d %s", code, body)
	}
	if code, body := status("GET", "/queues/app-1", "admin"); code != http.StatusNotFound {
		t.Fatalf("the refused create made a queue: %d %s", code, body)
	}

	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"Policies": {"app": {"Statement": [{"Effect": "Allow", "Action": "mns:CreateQueue", "Resource": "acs:mns:*:*:/queues/app-*"}]}},
	        "Keys": {"admin": ["AliyunMNSFullAccess"], "app": ["app"]}}`)
	hup()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := status("PUT", "/queues/app-1", "app")
		if code == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edited policy was not loaded on SIGHUP: %d %s\n%s", code, body, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := status("PUT", "/queues/other", "app"); code != http.StatusForbidden {
		t.Fatalf("create outside the policy: %d %s", code, body)
	}

	write(`{"Keys": {"app": ["AliyunMNSFullAcess"]}}`) // a typo
	hup()
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "access policies not reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload failure logged:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := status("PUT", "/queues/app-2", "app"); code != http.StatusCreated {
		t.Fatalf("the policies in force changed after a failed reload: %d %s", code, body)
	}
	if code, _ := status("PUT", "/queues/other", "app"); code != http.StatusForbidden {
		t.Fatalf("a failed reload widened the policies: %d", code)
	}
	// The metrics say which file's last reload failed.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`smqd_config_last_reload_successful{file="policies"} 0`,
		`smqd_config_last_reload_successful{file="credentials"} 1`,
		`smqd_config_last_reload_success_timestamp_seconds{file="policies"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	if strings.Contains(string(metrics), `file="tls"`) {
		t.Error("a reload series for TLS, which this daemon does not serve")
	}
}

func TestDaemonPolicyFileRefused(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pol, []byte(`{"Keys": {"k": ["nope"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--access-key-id", "k", "--access-key-secret", "s", "--policy-file", pol}
	if code := run(context.Background(), args, env(nil), io.Discard, &stderr, nil); code != 1 || !strings.Contains(stderr.String(), `no policy named \"nope\"`) {
		t.Fatalf("a policy file naming an undefined policy: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"--no-auth", "--policy-file", pol}, env(nil), io.Discard, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "--policy-file needs authentication") {
		t.Fatalf("--no-auth with --policy-file: exit %d: %s", code, stderr.String())
	}
}

func TestPolicyCheckCommand(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"Policies": {"w": {"Statement": [
	  {"Effect": "Allow", "Action": "mns:*Message", "Resource": "acs:mns:*:*:/queues/orders-*/messages"},
	  {"Effect": "Deny", "Action": "mns:DeleteMessage", "Resource": "acs:mns:*:*:/queues/orders-keep/messages"},
	  {"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"NotIpAddress": {"acs:SourceIp": "10.0.0.0/8"}}}]}},
	  "Keys": {"worker": ["w"], "admin": ["SmqdAdministratorAccess"], "app": ["AliyunMNSFullAccess"]},
	  "Limits": {"worker": {"RequestsPerSecond": 2.5}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"Keys": {"k": ["w"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"check", "--policy-file", pol}, 0, "valid; keys: admin, app, worker"},
		{[]string{"check", "--policy-file", pol}, 0, "key worker: at most 2.5 requests a second, bursts of 3"},
		{[]string{"check", "--policy-file", pol, "--key", "worker", "--action", "mns:sendmessage", "--resource", "acs:mns:cn-hangzhou:1:/queues/orders-1/messages", "--source-ip", "10.1.2.3"}, 0, `allowed by policy "w", statement 1`},
		{[]string{"check", "--policy-file", pol, "--key", "worker", "--action", "mns:sendmessage", "--resource", "/queues/orders-1/messages", "--source-ip", "11.1.2.3"}, 4, `denied by policy "w", statement 3`},
		{[]string{"check", "--policy-file", pol, "--key", "worker", "--action", "mns:sendmessage", "--resource", "/queues/orders-1/messages"}, 4, `denied by policy "w", statement 3`},
		{[]string{"check", "--policy-file", pol, "--key", "worker", "--action", "mns:sendmessage", "--resource", "/queues/orders-1/messages", "--source-ip", "nope"}, 2, "--source-ip"},
		{[]string{"check", "--policy-file", pol, "--key", "worker", "--action", "mns:DeleteMessage", "--resource", "/queues/orders-keep/messages", "--source-ip", "10.0.0.9"}, 4, `denied by policy "w", statement 2`},
		{[]string{"check", "--policy-file", pol, "--key", "worker", "--action", "mns:DeleteQueue", "--resource", "/queues/orders-1", "--source-ip", "10.0.0.9"}, 4, "denied: no statement allows it"},
		{[]string{"check", "--policy-file", pol, "--key", "nobody", "--action", "mns:ListQueue", "--resource", "/queues"}, 4, "no policy is attached"},
		{[]string{"check", "--policy-file", pol, "--key", "admin", "--action", "smqd:Backup", "--resource", "/backup"}, 0, "SmqdAdministratorAccess"},
		{[]string{"check", "--policy-file", pol, "--key", "app", "--action", "smqd:Backup", "--resource", "acs:mns:*:*:/backup"}, 4, "denied"},
		{[]string{"check", "--policy-file", pol, "--key", "app", "--action", "mns:DeleteQueue", "--resource", "acs:mns:*:*:/queues/x"}, 0, "AliyunMNSFullAccess"},
		{[]string{"check", "--policy-file", pol, "--key", "admin", "--action", "mns:Fly", "--resource", "/backup"}, 2, "no action"},
		{[]string{"check", "--policy-file", pol, "--key", "admin"}, 2, "usage"},
		{[]string{"check", "--policy-file", bad}, 1, `no policy named \"w\"`},
		{[]string{"lint", "--policy-file", pol}, 2, "usage"},
	} {
		var out, errOut bytes.Buffer
		code := runPolicy(c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), strings.ReplaceAll(c.out, `\"`, `"`)) {
			t.Errorf("smqd policy %q: exit %d (want %d): %s%s", c.args, code, c.code, out.String(), errOut.String())
		}
	}
}

// SIGHUP reads the credentials file again: a key added works, a key
// removed is refused at once, a changed secret is the only one accepted;
// a file that holds no key changes nothing.
func TestDaemonCredentialsReload(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(creds, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a asecret\nb bsecret\n")
	addr, _, stderr, _ := startDaemon(t, "--data-dir", filepath.Join(dir, "data"), "--credentials-file", creds)
	list := func(id, secret string) (int, string) {
		t.Helper()
		resp := signedRequest(t, "GET", "http://"+addr+"/queues", id, secret)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := list("b", "bsecret"); code != http.StatusOK {
		t.Fatalf("key b before the reload: %d %s", code, body)
	}
	write("a anewsecret\nc csecret\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := list("c", "csecret"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added key was not accepted after SIGHUP:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), "credentials reloaded") || !strings.Contains(stderr.String(), "added=1 removed=1 secret_changed=1") {
		t.Fatalf("the reload was not logged as it was:\n%s", stderr.String())
	}
	for _, c := range []struct{ id, secret, code string }{
		{"b", "bsecret", "InvalidAccessKeyId"},
		{"a", "asecret", "SignatureDoesNotMatch"},
	} {
		if code, body := list(c.id, c.secret); code != http.StatusForbidden || !strings.Contains(body, "<Code>"+c.code+"</Code>") {
			t.Fatalf("key %s with %s after the reload: %d %s", c.id, c.secret, code, body)
		}
	}
	if code, body := list("a", "anewsecret"); code != http.StatusOK {
		t.Fatalf("key a with its new secret: %d %s", code, body)
	}

	write("# every key removed by mistake\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "credentials not reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload failure logged:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := list("c", "csecret"); code != http.StatusOK {
		t.Fatalf("a failed reload changed the keys in force: %d %s", code, body)
	}
}
