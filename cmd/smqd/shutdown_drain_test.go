package main

import (
	"bufio"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A client that holds a request open past the drain's deadline (three
// quarters of --shutdown-timeout: a body still arriving, a slow reader)
// has its connection cut; the broker still closes cleanly, so the stop
// is a clean one: exit 0, with a warning that says what was cut, not
// Error "smqd failed" err="context deadline exceeded" and exit 1 (metrics3
// audit, 2026-12-07: a service manager counted every such stop a failure).
func TestDaemonStopPastTheDrainDeadlineIsClean(t *testing.T) {
	addr, _, stderr, stop := startDaemon(t, "--access-key-id", "AKDRAIN", "--access-key-secret", "DrainSecretValue123456", "--data-dir", filepath.Join(t.TempDir(), "d"), "--shutdown-timeout", "2s")
	resp := signedRequest(t, "PUT", "http://"+addr+"/queues/slow", "AKDRAIN", "DrainSecretValue123456")
	if resp.StatusCode != 201 {
		t.Fatalf("create: %v", resp)
	}
	resp.Body.Close()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A whole request first, answered: the connection is the server's.
	br := bufio.NewReader(c)
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != 200 {
		t.Fatalf("healthz on the slow connection: %v %v", r, err)
	} else {
		r.Body.Close()
	}
	// Then a send whose body stops halfway: in flight until the deadline.
	body := "<Message><MessageBody>never finished</MessageBody></Message>"
	r, _ := http.NewRequest("POST", "http://"+addr+"/queues/slow/messages", nil)
	date := time.Now().UTC().Format(http.TimeFormat)
	signMNS(r, "text/xml;charset=utf-8", date, "AKDRAIN", "DrainSecretValue123456")
	if _, err := c.Write([]byte("POST /queues/slow/messages HTTP/1.1\r\nHost: x\r\nDate: " + date + "\r\nx-mns-version: 2015-06-06\r\n" +
		"Content-Type: text/xml;charset=utf-8\r\nAuthorization: " + r.Header.Get("Authorization") + "\r\nExpect: 100-continue\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// The server's 100 Continue says it read the headers: the request is
	// in flight (a connection still reading its first bytes is idle).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	br.ReadString('\n') // the blank line after it
	if _, err := c.Write([]byte(body[:len(body)/2])); err != nil {
		t.Fatal(err)
	}
	code := stop() // startDaemon's stop fails the test if it takes over 20 s
	log := stderr.String()
	if code != 0 || strings.Contains(log, "smqd failed") {
		t.Fatalf("a stop whose only trouble was a slow client: exit %d\n%s", code, log)
	}
	if !strings.Contains(log, "requests still in flight at the drain deadline") {
		t.Fatalf("no warning about the request cut off:\n%s", log)
	}
}
