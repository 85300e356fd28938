package server

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestInvalidHeaderValueIsNotLogged: fasthttp refuses a header value with
// a control byte in it and quotes the value in its error ("invalid header
// value %q"), which smqd logs at debug level. An Authorization header with
// a stray byte after its signature put the signature in the log.
func TestInvalidHeaderValueIsNotLogged(t *testing.T) {
	var logs lockedBuffer
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	const sig = "U2lnbmF0dXJlT2ZUaGlzUmVxdWVzdA0="
	c, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /queues HTTP/1.1\r\nHost: x\r\nAuthorization: MNS id:" + sig + "\x00\r\nDate: Mon, 07 Dec 2026 12:00:00 GMT\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.ReadAll(c) // the 400, then the close
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		logs.mu.Lock()
		all := logs.b.String()
		logs.mu.Unlock()
		if strings.Contains(all, "invalid header value") {
			if strings.Contains(all, sig) {
				t.Fatalf("the request's signature is in the log:\n%s", all)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fasthttp's error was not logged:\n%s", all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
