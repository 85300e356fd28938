package server

// Benchmarks of the hot paths against the in-memory engine.
//
//	BenchmarkHTTP     whole HTTP exchanges over fasthttputil's in-memory
//	                  listener (client + server + engine), parallel clients;
//	                  reports req/s and msgs/s
//	BenchmarkHandler  the fasthttp handler called directly on a reused
//	                  RequestCtx: server + engine allocations per request
//	BenchmarkEngine   the same operations on the engine alone: the engine's
//	                  own allocations, for comparison
//
// Run: go test -run '^$' -bench . -benchmem ./server/

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

const benchBodySize = 256

func benchBody(i int) string {
	s := fmt.Sprintf("%08d", i)
	return s + strings.Repeat("x", benchBodySize-len(s))
}

func benchBroker(b *testing.B) *engine.Broker {
	br, err := engine.Open(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	// Messages received in a benchmark never come back during it.
	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = 12 * time.Hour
	if _, err := br.CreateQueue("bench", cfg); err != nil {
		b.Fatal(err)
	}
	return br
}

func benchServer(b *testing.B, br *engine.Broker) *Server {
	s, err := New(br, Options{Credentials: map[string]string{testKeyID: testSecret}})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// rawRequest builds a signed raw HTTP request (Go SDK style headers).
func rawRequest(method, target, body string, date time.Time) []byte {
	ds := date.UTC().Format(http.TimeFormat)
	h := map[string]string{"Date": ds, "x-mns-version": apiVersion}
	md5v, ctype := "", ""
	if body != "" {
		md5v, ctype = hexMD5b64(body), "text/xml;charset=utf-8"
		h["Content-MD5"], h["Content-Type"] = md5v, ctype
	}
	h["Authorization"] = sign(testKeyID, testSecret, method, md5v, ctype, ds, h, target)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s HTTP/1.1\r\nHost: bench\r\n", method, target)
	for k, v := range h {
		fmt.Fprintf(&sb, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(&sb, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return []byte(sb.String())
}

func batchSendBody(first int) string {
	return batchBody(16, func(i int) string { return "<MessageBody>" + benchBody(first+i) + "</MessageBody>" })
}

// fill sends n messages straight into the engine.
func fill(b *testing.B, br *engine.Broker, n int) {
	q, err := br.Queue("bench")
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]engine.SendEntry, 16)
	var out []engine.SendResult
	for sent := 0; sent < n; sent += 16 {
		k := min(16, n-sent)
		for i := 0; i < k; i++ {
			entries[i] = engine.SendEntry{Body: []byte(benchBody(sent + i))}
		}
		if out, err = q.Send(entries[:k], out[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// receiveAll takes n messages' handles straight from the engine.
func receiveAll(b *testing.B, br *engine.Broker, n int) []string {
	q, _ := br.Queue("bench")
	var hs []string
	var msgs []engine.Message
	for len(hs) < n {
		var err error
		msgs, err = q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, msgs[:0])
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range msgs {
			hs = append(hs, m.Handle.String())
		}
	}
	return hs
}

func batchDeleteRequests(hs []string, date time.Time) [][]byte {
	var reqs [][]byte
	for i := 0; i+16 <= len(hs); i += 16 {
		reqs = append(reqs, rawRequest("DELETE", "/queues/bench/messages", handlesBody(hs[i:i+16]...), date))
	}
	return reqs
}

// benchCase describes one operation: setup prepares the broker for n
// operations and returns the requests to send (one is reused if there is
// a single one), msgs per operation and the expected status.
type benchCase struct {
	name   string
	msgs   int
	status int
	setup  func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte
}

var benchCases = []benchCase{
	{"SendMessage", 1, 201, func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte {
		return [][]byte{rawRequest("POST", "/queues/bench/messages", sendBody(benchBody(0), ""), date)}
	}},
	{"BatchSendMessage", 16, 201, func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte {
		return [][]byte{rawRequest("POST", "/queues/bench/messages", batchSendBody(0), date)}
	}},
	{"ReceiveMessage", 1, 200, func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte {
		fill(b, br, n)
		return [][]byte{rawRequest("GET", "/queues/bench/messages", "", date)}
	}},
	{"BatchReceiveMessage", 16, 200, func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte {
		fill(b, br, 16*n)
		return [][]byte{rawRequest("GET", "/queues/bench/messages?numOfMessages=16", "", date)}
	}},
	{"DeleteMessage", 1, 204, func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte {
		fill(b, br, n)
		var reqs [][]byte
		for _, h := range receiveAll(b, br, n) {
			reqs = append(reqs, rawRequest("DELETE", "/queues/bench/messages?ReceiptHandle="+h, "", date))
		}
		return reqs
	}},
	{"BatchDeleteMessage", 16, 204, func(b *testing.B, br *engine.Broker, n int, date time.Time) [][]byte {
		fill(b, br, 16*n)
		return batchDeleteRequests(receiveAll(b, br, 16*n), date)
	}},
}

// BenchmarkHTTP runs whole exchanges over an in-memory listener with
// parallel client connections.
func BenchmarkHTTP(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			br := benchBroker(b)
			s := benchServer(b, br)
			ln := fasthttputil.NewInmemoryListener()
			go s.Serve(ln)
			b.Cleanup(func() { s.Shutdown(context.Background()) })
			reqs := bc.setup(b, br, b.N, time.Now())
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				conn, err := ln.Dial()
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				bw := bufio.NewWriter(conn)
				rd := bufio.NewReader(conn)
				var resp benchResponse
				for pb.Next() {
					i := next.Add(1) - 1
					r := reqs[0]
					if len(reqs) > 1 {
						r = reqs[i]
					}
					if err := exchange(bw, rd, &resp, r, bc.status); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(float64(b.N*bc.msgs)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// benchResponse is the benchmark client's reusable response: a parsed
// header and a body buffer that keeps its capacity, so that the client
// side allocates nothing and allocs/op are the server's and the engine's.
type benchResponse struct {
	hdr  fasthttp.ResponseHeader
	body []byte
}

func exchange(bw *bufio.Writer, rd *bufio.Reader, resp *benchResponse, req []byte, status int) error {
	if _, err := bw.Write(req); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	resp.hdr.Reset()
	if err := resp.hdr.Read(rd); err != nil {
		return err
	}
	n := resp.hdr.ContentLength()
	if resp.hdr.StatusCode() == fasthttp.StatusNoContent {
		n = 0
	}
	if n < 0 {
		return fmt.Errorf("response without Content-Length")
	}
	if cap(resp.body) < n {
		resp.body = make([]byte, n)
	}
	resp.body = resp.body[:n]
	if _, err := io.ReadFull(rd, resp.body); err != nil {
		return err
	}
	if resp.hdr.StatusCode() != status {
		return fmt.Errorf("status %d: %s", resp.hdr.StatusCode(), resp.body)
	}
	return nil
}

// BenchmarkHandler calls the handler directly on a reused RequestCtx, so
// that allocs/op are the server's and the engine's only.
func BenchmarkHandler(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			br := benchBroker(b)
			s := benchServer(b, br)
			reqs := bc.setup(b, br, b.N, time.Now())
			parsed := make([]fasthttp.Request, min(len(reqs), b.N))
			for i := range parsed {
				if err := parsed[i].Read(bufio.NewReader(strings.NewReader(string(reqs[i])))); err != nil {
					b.Fatal(err)
				}
			}
			var ctx fasthttp.RequestCtx
			addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
			ctx.Init(&parsed[0], addr, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if len(parsed) > 1 {
					parsed[i].CopyTo(&ctx.Request)
				}
				// Like fasthttp's server (keepBodyBuffer), keep the response's
				// body buffer across requests: reset only the header.
				ctx.Response.Header.Reset()
				s.handle(&ctx)
				if ctx.Response.StatusCode() != bc.status {
					b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkEngine is the engine's own cost of the same operations.
func BenchmarkEngine(b *testing.B) {
	b.Run("Send1", func(b *testing.B) {
		br := benchBroker(b)
		q, _ := br.Queue("bench")
		e := []engine.SendEntry{{Body: []byte(benchBody(0))}}
		var out []engine.SendResult
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			out, _ = q.Send(e, out[:0])
		}
	})
	b.Run("Send16", func(b *testing.B) {
		br := benchBroker(b)
		q, _ := br.Queue("bench")
		e := make([]engine.SendEntry, 16)
		for i := range e {
			e[i].Body = []byte(benchBody(i))
		}
		var out []engine.SendResult
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			out, _ = q.Send(e, out[:0])
		}
	})
	for _, max := range []int{1, 16} {
		b.Run(fmt.Sprintf("Receive%d", max), func(b *testing.B) {
			br := benchBroker(b)
			fill(b, br, max*b.N)
			q, _ := br.Queue("bench")
			var msgs []engine.Message
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				msgs, err = q.Receive(context.Background(), engine.ReceiveOptions{Max: max, HasWait: true}, msgs[:0])
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Delete%d", max), func(b *testing.B) {
			br := benchBroker(b)
			fill(b, br, max*b.N)
			q, _ := br.Queue("bench")
			var hs []engine.ReceiptHandle
			var msgs []engine.Message
			for len(hs) < max*b.N {
				msgs, _ = q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, msgs[:0])
				for _, m := range msgs {
					hs = append(hs, m.Handle)
				}
			}
			errs := make([]error, max)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := q.Delete(hs[i*max:(i+1)*max], errs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkXMLParse is the request parser alone on a 16-message batch.
func BenchmarkXMLParse(b *testing.B) {
	in := []byte(batchSendBody(0))
	var d xmlDoc
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := d.parse(in); err != nil {
			b.Fatal(err)
		}
	}
}
