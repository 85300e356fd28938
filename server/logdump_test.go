package server

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// fasthttp's own connection errors are logged (at debug level) without
// the request's bytes: with SecureErrorLogMessage it still quotes the
// whole header block for a request line without a second space
// ("cannot find whitespace in the first line of request %q"), so the
// Authorization header's signature, the Date it covers and every other
// header went to the log (proxy audit, 2026-12-07).
func TestFasthttpErrorsLogNoRequestBytes(t *testing.T) {
	var logs lockedBuffer
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	const sig = "U2lnbmF0dXJlT2ZUaGlzUmVxdWVzdA0="
	for _, req := range []string{
		// A bare LF ends the request line early: one space in it.
		"GET /queues\nX HTTP/1.1\r\nHost: x\r\nAuthorization: MNS id:" + sig + "\r\nDate: Mon, 07 Dec 2026 12:00:00 GMT\r\n\r\n",
		// The same with LF line ends throughout.
		"GET /queues\nAuthorization: MNS id:" + sig + "\nHost: x\n\n",
		// A control byte after the signature: fasthttp quotes the whole
		// value ("invalid header value %q"; flags audit, 2026-12-07).
		"GET /queues HTTP/1.1\r\nHost: x\r\nAuthorization: MNS id:" + sig + "\x00\r\nDate: Mon, 07 Dec 2026 12:00:00 GMT\r\n\r\n",
	} {
		c, err := net.Dial("tcp", env.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.ReadAll(c) // the 400, then the close
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		logs.mu.Lock()
		all := logs.b.String()
		logs.mu.Unlock()
		if strings.Count(all, "first line of request") >= 2 && strings.Contains(all, "invalid header value") {
			if strings.Contains(all, sig) {
				t.Fatalf("the request's signature is in the log:\n%s", all)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fasthttp's three errors were not logged:\n%s", all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
