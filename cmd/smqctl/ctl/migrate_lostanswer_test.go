package ctl

// backups2 audit (2026-12-07): a batch send whose answer is lost after
// the destination stored it (a timeout, a reset connection: a node that
// stalled, a proxy that dropped the connection) is retried by call(), and
// the retry stores every message of the batch a second time. The run
// counted each once, said nothing and exited 0 (seen with real daemons: a
// 3-node destination's endpoint node SIGSTOPped for 5 s under
// `smqctl --timeout 2s migrate`: "messages moved: 20000", exit 0, 20048
// messages at the destination, 48 bodies twice).

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// storeThenFail is a proxy in front of d whose first send (POST of
// messages) is passed on, stored, and then answered by fail instead.
func storeThenFail(t *testing.T, d *daemon, fail func(w http.ResponseWriter)) string {
	t.Helper()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: d.addr})
	var n atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/messages") && n.Add(1) == 1 {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r) // stored at the destination
			fail(w)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// dropAnswer closes the connection: the answer is lost.
func dropAnswer(w http.ResponseWriter) {
	if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
		c.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// mayHaveRun answers as a cluster node whose shard's leader gave the
// request up, or did not answer it: 503, "may or may not have run".
func mayHaveRun(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(503)
	io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error xmlns="http://mns.aliyuncs.com/doc/v1"><Code>ServiceUnavailable</Code>`+
		`<Message>the leader of the queue's shard did not answer; the request may or may not have run: test</Message><RequestId>0</RequestId><HostId>h</HostId></Error>`)
}

func TestMigrateLostAnswerIsNotSilent(t *testing.T) {
	t.Run("dropped", func(t *testing.T) { migrateThroughFailure(t, dropAnswer) })
	t.Run("503 may or may not have run", func(t *testing.T) { migrateThroughFailure(t, mayHaveRun) })
}

func migrateThroughFailure(t *testing.T, fail func(w http.ResponseWriter)) {
	src, dst := startDaemon(t), startDaemon(t)
	q := src.queueWith(t, "work", func(cfg *engine.QueueConfig) { cfg.VisibilityTimeout = 30 * time.Second })
	for i := range 16 {
		sendEntries(t, q, engine.SendEntry{Body: []byte(strings.Repeat("b", i+1))})
	}
	proxy := storeThenFail(t, dst, fail)
	r := src.ctl(t).run("migrate", "--to", proxy, "--parallel", "1", "--wait", "10s")
	if info := src.info(t, "work"); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("the source still holds %+v", info)
	}
	dq, _ := dst.b.Queue("work")
	got := bodies(t, dq)
	if len(got) == 16 {
		return // each once: nothing to report
	}
	// More than 16: some are twice at the destination, which the run must
	// say, and exit 1, as it does for a copy whose original's delete missed.
	if r.code != ExitError || !strings.Contains(r.stdout, "twice") {
		t.Errorf("the destination holds %d copies of 16 messages, but the run exited %d and said nothing of it\nstdout: %s\nstderr: %s",
			len(got), r.code, r.stdout, r.stderr)
	}
}
