package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runSDKPolicy: @alicloud/mns with a key held by a policy (policy.js). The
// daemon starts with an empty policy file; the test then adds a second
// key to the generated credentials file, writes the policies (the
// generated key on SmqdAdministratorAccess, the second on one queue's
// messages) and sends SIGHUP, so the reload of both files is exercised
// with the real binary too.
func runSDKPolicy(t *testing.T, node, dir, bin string) {
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startBinary(t, bin, "--policy-file", pol)
	const limitedID, limitedSecret = "sdk-limited", "sdk-limited-secret-0123456789"
	credPath := filepath.Join(d.dataDir, defaultCredentialsName)
	creds, err := os.ReadFile(credPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(credPath, append(creds, []byte(limitedID+" "+limitedSecret+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := `{"Policies": {"worker": {"Version": "1", "Statement": [
	  {"Effect": "Allow", "Action": ["mns:SendMessage", "mns:ReceiveMessage", "mns:DeleteMessage", "mns:ChangeMessageVisibility"],
	   "Resource": "acs:mns:*:*:/queues/sdk-policy-*/messages"},
	  {"Effect": "Allow", "Action": "mns:GetQueueAttributes", "Resource": "acs:mns:*:*:/queues/sdk-policy-*"}]}},
	 "Keys": {"` + d.keyID + `": ["SmqdAdministratorAccess"], "` + limitedID + `": ["worker"]}}`
	if err := os.WriteFile(pol, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(d.stderr.String(), "credentials reloaded") || strings.Count(d.stderr.String(), "access policies loaded") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the credentials and policies were not reloaded on SIGHUP:\n%s", d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := nodeEnv()
	env := append(base[:len(base):len(base)],
		"SMQD_ENDPOINT="+d.endpoint,
		"SMQD_ACCESS_KEY_ID="+d.keyID,
		"SMQD_ACCESS_KEY_SECRET="+d.secret,
		"SMQD_LIMITED_KEY_ID="+limitedID,
		"SMQD_LIMITED_KEY_SECRET="+limitedSecret,
	)
	runNodeScript(t, node, dir, "policy.js", env)
	d.stop(t)
}
