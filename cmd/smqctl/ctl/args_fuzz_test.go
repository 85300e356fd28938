package ctl

// FuzzArgs: any command line (args split at NUL bytes) run against an
// in-process smqd never panics, exits with one of the documented codes,
// and explains every failure on stderr. Verbs that write files (backup),
// talk to another server (migrate, --endpoint) or redraw until stopped
// (stats) are left out; a run gets 5 s (a receive may long-poll).

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

func FuzzArgs(f *testing.F) {
	for _, s := range []string{
		"queue\x00create\x00q", "queue\x00create\x00q\x00--visibility\x0010\x00--logging=false",
		"queue\x00ls", "queue\x00ls\x00--json", "queue\x00get\x00q", "queue\x00get\x00",
		"queue\x00set\x00q\x00--delay\x005", "queue\x00purge\x00q", "queue\x00rm\x00q",
		"message\x00send\x00q\x00hello", "send\x00q\x00hi\x00--priority\x0017", "send\x00q\x00--\x00-x",
		"receive\x00q\x00--json", "receive\x00q\x00--delete\x00-n\x0016", "peek\x00q\x00-n\x0099",
		"message\x00delete\x00q\x001-bad", "message\x00visibility\x00q\x001-bad\x00--seconds\x00-1",
		"topic\x00create\x00t", "topic\x00publish\x00t\x00m\x00--tag\x00a", "topic\x00ls",
		"subscription\x00create\x00t\x00s\x00--endpoint\x00acs:mns:r:a:queues/q",
		"subscription\x00ls\x00t", "--help", "queue\x00--timeout\x000s\x00ls", "nosuch",
	} {
		f.Add(s)
	}
	d := startDaemonWith(f, engine.Options{})
	env := map[string]string{
		"SMQ_ENDPOINT":                    "http://" + d.addr,
		"ALIBABA_CLOUD_ACCESS_KEY_ID":     keyID,
		"ALIBABA_CLOUD_ACCESS_KEY_SECRET": keySecret,
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		if slices.ContainsFunc(args, func(a string) bool {
			return a == "backup" || a == "migrate" || a == "stats" || strings.Contains(a, "endpoint")
		}) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		code := Run(ctx, args, Env{Getenv: func(k string) string { return env[k] }, Stdin: strings.NewReader("body"),
			Stdout: &out, Stderr: &errb, Dir: dir})
		if code < ExitOK || code > ExitUnhealthy {
			t.Fatalf("smqctl %q: exit %d\nstderr: %s", args, code, errb.String())
		}
		if code != ExitOK && code != ExitUnhealthy && errb.Len() == 0 {
			t.Fatalf("smqctl %q: exit %d without a message (stdout %q)", args, code, out.String())
		}
	})
}
