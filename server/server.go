package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/server/access"
	"github.com/smqd/smqd/server/mnsauth"
	"github.com/valyala/fasthttp"
)

// Server is the MNS-compatible HTTP facade of a Broker.
//
// It owns no queue state: every request is parsed, authenticated, validated
// and handed to the engine, and the engine's answer is encoded. The broker
// is owned by the caller, who closes it after Shutdown returns (with
// Options.Reopen, the one Broker returns: reopen.go).
type Server struct {
	bp   atomic.Pointer[engine.Broker] // the broker (single node; reopen.go swaps it, nil while it reopens); nil with a cluster
	c    *cluster.Node                 // the cluster node (NewCluster); nil for a single node
	opts Options
	log  *slog.Logger
	auth *authenticator
	pol  atomic.Pointer[access.Set] // nil: every key may do everything (authz.go)
	srv  *fasthttp.Server
	ops  *fasthttp.Server // /metrics and /healthz on their own listener (ServeMetrics)

	// base is cancelled by Shutdown; long polls wait on it.
	base    context.Context
	watch   watchSet // receives waiting on their clients (clientwatch.go)
	cancel  context.CancelFunc
	closing atomic.Bool
	// draining: /healthz answers 503 while everything else still serves
	// (Drain: smqd --shutdown-delay).
	draining atomic.Bool

	lnMu sync.Mutex
	lns  []net.Listener // guarded by lnMu: listeners given to Serve

	states  sync.Pool // *reqState
	fwd     sync.Pool // *fwdOut (cluster.go)
	fwdIn   sync.Pool // *fwdIn (cluster.go)
	queues  queueCache
	metrics metrics
	console *consoleAssets // nil unless Options.Console
	conns   *connSlots     // the connection cap, shared by every API listener
	opConns *connSlots     // the cap of the ServeMetrics listeners

	idPrefix uint32        // random per process: request ids stay unique across restarts
	idSeq    atomic.Uint32 // request id counter

	testHook atomic.Pointer[func(op)] // tests: called before an operation runs

	denied     deniedLog     // requests refused by policy (authz.go)
	overRate   everySecond   // the log of requests over their key's rate (authz.go)
	badProxy   everySecond   // the log of trusted connections without a PROXY header (proxyproto.go)
	failedLog  everySecond   // the log of requests failed for a reason the error table does not know (fail)
	reopens    atomic.Int64  // broker reopens after a storage failure (reopen.go)
	backups    backupStats   // GET /backup (backup.go)
	rerouted   atomic.Int64  // cluster requests run again on a shard's new leader (cluster.go)
	keeperDone chan struct{} // closed when keepStorage ends; nil if it never ran
}

// New returns a Server for b. It fails only on invalid Options.
func New(b *engine.Broker, opts Options) (*Server, error) {
	if b == nil {
		return nil, errors.New("server: nil broker")
	}
	return newServer(b, nil, opts)
}

func newServer(b *engine.Broker, c *cluster.Node, opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Server{
		c:       c,
		opts:    opts,
		log:     opts.Logger,
		auth:    newAuthenticator(&opts),
		conns:   newConnSlots(opts.MaxConns),
		opConns: newConnSlots(maxOpsConns),
	}
	s.bp.Store(b)
	s.pol.Store(opts.Policies)
	s.base, s.cancel = context.WithCancel(context.Background())
	s.watch.base = s.base
	s.metrics.init(s)
	if opts.Console {
		var err error
		if s.console, err = loadConsole(consoleFeatures{Topics: true, Cluster: c != nil}); err != nil {
			return nil, err
		}
	}
	s.states.New = func() any { return new(reqState) }
	s.queues.m = make(map[string]cachedQueue)
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	s.idPrefix = binary.BigEndian.Uint32(nonce[:])
	s.srv = &fasthttp.Server{
		Handler:      s.handle,
		ErrorHandler: s.handleTransportError,
		Name:         opts.Name,
		// Bodies are read by the handler once the headers are
		// authenticated (body.go); fasthttp reads the headers and at most
		// prefetchBytes of body, under HeaderTimeout.
		StreamRequestBody:  true,
		ExpectHandler:      s.expect,
		MaxRequestBodySize: opts.MaxRequestBodyBytes,
		ReadBufferSize:     readBufferBytes,
		ReadTimeout:        opts.HeaderTimeout,
		WriteTimeout:       opts.WriteTimeout,
		IdleTimeout:        opts.IdleTimeout,
		// The listeners hold the cap (conns.go). fasthttp's own limit,
		// which answers in plain text, must never bite first: a worker
		// is freed a moment after its connection's slot.
		Concurrency:                  2 * opts.MaxConns,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		DisablePreParseMultipartForm: true,
		// One write per response: a batch receive answers with ~17 KiB
		// for 16 messages of 1 KiB, which fasthttp's default 4 KiB writer
		// sends in two writes. With ReduceMemoryUsage the writer goes
		// back to a pool after each response, so a large one costs
		// memory per response in flight, not per open connection.
		WriteBufferSize:   responseBufferBytes,
		ReduceMemoryUsage: true,
		// Logging of fasthttp's own connection errors goes to our logger,
		// without the request's bytes: a malformed request's dump held its
		// signature and body (docs/operations.md: nothing secret is logged).
		Logger:                fasthttpLogger{s.log},
		SecureErrorLogMessage: true,
	}
	s.ops = &fasthttp.Server{
		Handler:                      s.handleOps,
		Name:                         opts.Name,
		ReadTimeout:                  opts.HeaderTimeout,
		WriteTimeout:                 opts.WriteTimeout,
		IdleTimeout:                  opts.IdleTimeout,
		MaxRequestBodySize:           4 << 10,
		Concurrency:                  2 * maxOpsConns,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		DisablePreParseMultipartForm: true,
		Logger:                       fasthttpLogger{s.log},
		SecureErrorLogMessage:        true,
	}
	s.startKeeper()
	return s, nil
}

// readBufferBytes is a connection's read buffer, which bounds its request
// line and headers (fasthttp's default; each held connection has one).
const readBufferBytes = 4 << 10

// responseBufferBytes is the write buffer of a response being sent: the
// whole response of a batch of 16 messages of 2 KiB, in one write.
const responseBufferBytes = 40 << 10

// Serve accepts connections on ln until Shutdown: the API, /healthz and,
// unless Options.SeparateMetrics, /metrics; over TLS when Options.TLS is
// set. It returns nil after Shutdown and the listener's error otherwise.
func (s *Server) Serve(ln net.Listener) error {
	var sln net.Listener = s.limit(ln, s.conns)
	if s.opts.ProxyProtocol {
		sln = &proxyListener{Listener: sln, s: s} // under TLS: the header comes first
	}
	if s.opts.TLS != nil {
		sln = &tlsListener{Listener: sln, cfg: s.opts.TLS, s: s} // tlsplain.go
	}
	s.log.Info("serving", "addr", ln.Addr().String(), "tls", s.opts.TLS != nil, "auth", !s.opts.NoAuth, "max_conns", s.opts.MaxConns, "proxy_protocol", s.opts.ProxyProtocol)
	return s.serveOn(s.srv, sln)
}

// ServeMetrics accepts connections on ln until Shutdown and answers GET
// /metrics and /healthz there, unauthenticated and in plain HTTP: give it
// an address only operators reach. With Options.SeparateMetrics, it is the
// only place /metrics is served. It returns nil after Shutdown.
func (s *Server) ServeMetrics(ln net.Listener) error {
	s.log.Info("serving metrics", "addr", ln.Addr().String())
	return s.serveOn(s.ops, s.limit(ln, s.opConns))
}

// serveOn runs srv on ln, which Shutdown closes.
func (s *Server) serveOn(srv *fasthttp.Server, ln net.Listener) error {
	s.lnMu.Lock()
	if s.closing.Load() {
		s.lnMu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.lnMu.Unlock()
	err := srv.Serve(ln)
	if s.closing.Load() {
		return nil
	}
	return err
}

// Drain makes /healthz answer 503 "draining" while the server goes on
// serving every request: a load balancer that probes it stops sending new
// connections before Shutdown closes the listener (smqd --shutdown-delay).
// The API's listener used to close with the first sign of the stop, and
// requests racing its close met a reset or EOF they could not tell from a
// lost answer (drain audit, 2026-12-06).
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops accepting connections, answers every waiting long poll at
// once (404 MessageNotExist, as if the wait had ended), lets requests in
// flight finish, closes idle connections and returns. If ctx ends first it
// returns ctx.Err() with connections still open. It does not close the
// broker.
func (s *Server) Shutdown(ctx context.Context) error {
	s.lnMu.Lock()
	s.closing.Store(true)
	lns := s.lns
	s.lns = nil
	s.lnMu.Unlock()
	// The API's listener closes at once and its requests in flight drain;
	// the metrics listener (--metrics-listen) stays up until they have,
	// so that probes see /healthz answer 503 and scrapes go on meanwhile.
	done := make(chan error, 1)
	go func() { done <- s.srv.ShutdownWithContext(ctx) }()
	s.cancel()
	var err error
	for _, e := range []error{<-done, s.ops.ShutdownWithContext(ctx)} {
		if e != nil && !errors.Is(e, net.ErrClosed) && err == nil {
			err = e
		}
	}
	// A Serve that had not reached fasthttp's accept loop when fasthttp
	// shut down is stopped by closing its listener (fasthttp closed the
	// others already; the error of a second close is of no interest).
	for _, ln := range lns {
		ln.Close()
	}
	if s.keeperDone != nil {
		<-s.keeperDone // reopen.go invariant 1
	}
	s.log.Info("server stopped", "err", err)
	return err
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug(withoutRequestBytes(fmt.Sprintf(format, args...)), "library", "fasthttp") // component=server already
}

// withoutRequestBytes cuts a quoted dump of a request's bytes out of a
// fasthttp message at its first line end. SecureErrorLogMessage leaves
// one dump in: a request line without a second space ("cannot find
// whitespace in the first line of request %q") quoted the whole header
// block, the Authorization header's signature and the Date it covers
// included (proxy audit, 2026-12-07; TestFasthttpErrorsLogNoRequestBytes).
// What stays is at most the request line, which holds no secret.
func withoutRequestBytes(msg string) string {
	msg = withoutHeaderValue(msg)
	i := strings.Index(msg, `\n`) // %q's escape of a line end: a dump
	if j := strings.Index(msg, `\r`); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i < 0 {
		return msg
	}
	return msg[:i] + `..." (the rest of the request is not logged)`
}

// withoutHeaderValue drops the value fasthttp quotes in "invalid header
// value %q" (and its trailer twin): a control byte in an Authorization
// header put the signature before it in the log (flags audit).
func withoutHeaderValue(msg string) string {
	for _, m := range []string{"invalid header value ", "invalid trailer value "} {
		i := strings.Index(msg, m)
		if i < 0 {
			continue
		}
		i += len(m)
		q, err := strconv.QuotedPrefix(msg[i:])
		if err != nil {
			q = msg[i:]
		}
		msg = msg[:i] + "(not logged)" + msg[i+len(q):]
	}
	return msg
}

// queueCache maps queue names to queues so that the hot path does not turn
// the name into a string (the map index with string(bytes) does not
// allocate). An entry of a deleted queue is dropped when the engine says
// ErrQueueNotExist for it.
//
// In a cluster a shard's broker is replaced when its node stops leading
// the shard (engine/cluster), so an entry also names its broker and is
// used only for that broker. Entries of a closed broker (replaced in a
// cluster, or reopened after a storage failure) are dropped by the next
// miss, at most every cacheSweepEvery: one entry kept a replaced broker's
// whole state in memory (130 MB in the soak audit) until its own name was
// asked for again.
type queueCache struct {
	mu        sync.RWMutex
	m         map[string]cachedQueue // guarded by mu
	lastSweep atomic.Int64           // Unix ns of the last sweep
}

// cacheSweepEvery bounds how often a miss looks for entries of closed
// brokers.
const cacheSweepEvery = 10 * time.Second

type cachedQueue struct {
	b *engine.Broker
	q *engine.Queue
}

func (c *queueCache) get(b *engine.Broker, name []byte) (*engine.Queue, error) {
	c.mu.RLock()
	e := c.m[string(name)]
	c.mu.RUnlock()
	if e.q != nil && e.b == b {
		return e.q, nil
	}
	// On every miss, found or not, at most every cacheSweepEvery; the
	// exclusive lock only then (a miss of a queue that does not exist,
	// each 404, took it every time; found in review).
	if now, last := time.Now().UnixNano(), c.lastSweep.Load(); now-last >= int64(cacheSweepEvery) && c.lastSweep.CompareAndSwap(last, now) {
		c.mu.Lock()
		for n, e := range c.m {
			if e.b.Closed() {
				delete(c.m, n)
			}
		}
		c.mu.Unlock()
	}
	q, err := b.Queue(string(name))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) > 100000 { // a bound, in case names churn a lot
		clear(c.m)
	}
	c.m[q.Name()] = cachedQueue{b, q}
	c.mu.Unlock()
	return q, nil
}

func (c *queueCache) drop(name []byte, q *engine.Queue) {
	c.mu.Lock()
	if cur := c.m[string(name)].q; cur != nil && (q == nil || cur == q) {
		delete(c.m, string(name))
	}
	c.mu.Unlock()
}

// appendRequestID appends a request id: 24 upper-case hex digits, the first
// 8 the Unix time in seconds (spec §2.4), then a per-process nonce and a
// counter.
func (s *Server) appendRequestID(b []byte, now time.Time) []byte {
	v := [3]uint32{uint32(now.Unix()), s.idPrefix, s.idSeq.Add(1)}
	for _, x := range v {
		for shift := 28; shift >= 0; shift -= 4 {
			b = append(b, upperHexDigits[(x>>uint(shift))&15])
		}
	}
	return b
}

const upperHexDigits = "0123456789ABCDEF"

// handle is the fasthttp handler: every request passes here.
func (s *Server) handle(ctx *fasthttp.RequestCtx) { s.run(ctx, nil) }

// run serves one request; fw describes a request another node of the
// cluster forwarded (cluster.go), nil for a client's.
func (s *Server) run(ctx *fasthttp.RequestCtx, fw *forwardedFrom) {
	start := time.Now()
	st := s.states.Get().(*reqState)
	st.op = opUnknown
	st.fw = fw
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "panic", r, "op", st.op.String(), "stack", string(debug.Stack()))
			ctx.Response.Reset()
			setCommonHeaders(ctx, st.reqID)
			s.writeError(ctx, st, codeInternalError, "internal error")
		}
		if fw == nil {
			// A forwarded request is counted by the node its client
			// reached, with the answer the client got; counted here too,
			// it counted twice in the nodes' sum, and the not-run answers
			// no client saw as 5xx (cluster ops audit, 2026-12-06).
			s.metrics.observe(st.op, ctx.Response.StatusCode(), time.Since(start))
		}
		s.audit(ctx, st)
		st.release()
		s.states.Put(st)
	}()

	st.reqID = s.appendRequestID(st.reqID[:0], start)
	setCommonHeaders(ctx, st.reqID)
	s.serve(ctx, st)
	if fw == nil && s.closing.Load() {
		// fasthttp's CloseOnShutdown says so only once its Shutdown has
		// begun, which the long polls Shutdown answers raced: about half
		// of those answers lacked it, and the SDKs, polling again at
		// once, sent their next poll on a connection being closed
		// (shutdown audit, 2026-12-07). A forwarded request's node says
		// it to its own client if it is closing.
		ctx.SetConnectionClose()
	}
}

// setCommonHeaders sets the headers of every response (spec §2.4), with
// lower-case names like the real service's.
func setCommonHeaders(ctx *fasthttp.RequestCtx, reqID []byte) {
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetBytesV("x-mns-request-id", reqID)
	ctx.Response.Header.Set("x-mns-version", apiVersion)
}

// serve routes one request and runs its operation.
func (s *Server) serve(ctx *fasthttp.RequestCtx, st *reqState) {
	target := stripAbsoluteForm(ctx.Request.Header.RequestURI())
	path, rawQuery, _ := splitTarget(target)
	r := route(ctx.Request.Header.Method(), path)
	st.op = r.op
	switch r.op {
	case opHealthz:
		s.healthz(ctx)
		return
	case opPushCert:
		s.servePushCert(ctx, st, path)
		return
	case opCluster:
		// Unsigned beside an unsigned /metrics; with the metrics on their
		// own address, here for signed requests only (smqctl cluster
		// status, the console), and unsigned there (handleOps).
		if !s.opts.SeparateMetrics {
			s.serveClusterStatus(ctx, st)
			return
		}
	case opMetrics:
		if !s.opts.SeparateMetrics {
			s.serveSharedMetrics(ctx, st)
			return
		}
		s.refuse(ctx, st, newAPIError(codeInvalidRequestURL, "/metrics is served on the metrics address, not here"))
		return
	case opConsole:
		if s.console != nil {
			s.serveConsole(ctx, path)
			return
		}
		s.refuse(ctx, st, newAPIError(codeInvalidRequestURL, "the web console is off (--console=false)"))
		return
	case opUnknown:
		s.refuse(ctx, st, newAPIError(codeInvalidRequestURL, "no operation at "+string(ctx.Request.Header.Method())+" "+string(path)))
		return
	}
	// Without authentication, browsers' word on where a request comes from
	// is what keeps other sites' pages out (console.go, crossSite). With
	// it, the signature does: a cross-site request cannot carry one.
	if s.opts.NoAuth && crossSite(&ctx.Request.Header) {
		s.refuse(ctx, st, newAPIError(codeAccessDenied, "cross-site requests are refused, and with --no-auth any under a host name other than localhost: call the API at an IP address or localhost, from a client or from the console served by this server"))
		return
	}
	if h := s.testHook.Load(); h != nil {
		(*h)(r.op)
	}
	st.tls = s.secureTransport(ctx) || (st.fw != nil && st.fw.tls) // clientaddr.go
	// Headers first: nothing of the body is read for a request that fails
	// them (body.go).
	if err := s.checkHeaders(ctx, st, target); err != nil {
		s.refuse(ctx, st, err)
		return
	}
	// Then the key's policies and rate, which need only the headers and
	// the query: a refused request's body is drained, never buffered
	// (a key refused everything, or over its rate, made the server read
	// and keep up to MaxRequestBodyBytes of it; security2 audit).
	var err error
	st.qbuf, err = parseQuery(rawQuery, &st.query, st.qbuf)
	if err != nil {
		s.refuseAuthenticated(ctx, st, err)
		return
	}
	st.op = refinedOp(r.op, &st.query)
	s.noteSource(ctx, st)
	if err = s.authorize(st, &r); err != nil {
		s.refuseAuthenticated(ctx, st, err)
		return
	}
	if err = s.rateLimit(st); err != nil {
		s.refuseAuthenticated(ctx, st, err)
		return
	}
	if err := s.readBody(ctx, st); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			s.refuse(ctx, st, err)
			return
		}
		// The body could not be read (timeout, truncated): the connection
		// is done.
		ctx.SetConnectionClose()
		s.fail(ctx, st, newAPIError(codeInvalidArgument, "the request body could not be read: "+err.Error()))
		return
	}
	// The signature covers Content-MD5, not the body: comparing the two is
	// what ties the body to the signature (a captured request cannot be
	// replayed with another body).
	if md5 := ctx.Request.Header.Peek("Content-MD5"); len(md5) > 0 && !mnsauth.ContentMD5Matches(md5, st.body) {
		s.fail(ctx, st, newAPIError(codeInvalidDegist, "the Content-MD5 header does not match the request body (neither base64 of the hex MD5 nor base64 of the raw MD5)"))
		return
	}
	if r.op == opClusterAddNode || r.op == opClusterRemoveNode {
		st.ran, st.name = true, append(st.name[:0], r.queue...)
		s.changeMembers(ctx, st, r.queue)
		return
	}
	if r.op == opBackup {
		st.ran = true
		s.serveBackup(ctx, st)
		return
	}
	if r.op == opCancelBackup {
		st.ran = true
		s.cancelBackup(ctx, st)
		return
	}
	if r.op == opCluster {
		s.serveClusterStatus(ctx, st)
		return
	}
	if r.op.isTopic() {
		if err := s.serveTopic(ctx, st, r); err != nil {
			s.fail(ctx, st, err)
		}
		return
	}
	if r.queue != nil {
		st.name, err = decodeQueueName(st.name[:0], r.queue)
		if err != nil {
			s.fail(ctx, st, err)
			return
		}
		if s.c == nil {
			if st.b = s.broker(); st.b == nil {
				s.fail(ctx, st, errReopening)
				return
			}
		} else {
			s.serveClusterQueue(ctx, st, r.op) // cluster.go
			return
		}
	}
	if err = s.dispatch(ctx, st, r.op); err != nil {
		s.fail(ctx, st, err)
	}
}

// dispatch runs a routed request on st.b (or, for ListQueue, on every
// broker), writing its answer, or returns the error to answer.
func (s *Server) dispatch(ctx *fasthttp.RequestCtx, st *reqState, op op) (err error) {
	st.ran = true
	if op.isTopic() {
		return s.dispatchTopic(ctx, st, op) // topics.go
	}
	switch op {
	case opListQueue:
		err = s.listQueues(ctx, st)
	case opCreateQueue:
		if st.query.metaOverride.present && isTrue(st.query.metaOverride.val) {
			st.op = opSetQueueAttributes
			err = s.setQueueAttributes(ctx, st)
		} else {
			err = s.createQueue(ctx, st)
		}
	case opGetQueueAttributes:
		err = s.getQueueAttributes(ctx, st)
	case opDeleteQueue:
		err = s.deleteQueue(ctx, st)
	case opSendMessage:
		err = s.send(ctx, st)
	case opReceiveMessage:
		err = s.receiveOrPeek(ctx, st)
	case opDeleteMessage:
		err = s.deleteMessages(ctx, st)
	case opChangeMessageVisibility:
		err = s.changeVisibility(ctx, st)
	}
	return err
}

// decodeQueueName percent-decodes a path segment and validates it as a
// queue name.
func decodeQueueName(dst, seg []byte) ([]byte, error) {
	dst, ok := appendPercentDecoded(dst, seg)
	if !ok {
		return dst, newAPIError(codeInvalidQueueName, "the queue name in the path has a malformed percent-escape")
	}
	if len(dst) < 1 || len(dst) > engine.MaxQueueNameLen {
		return dst, engine.ErrQueueNameLength
	}
	for i, c := range dst {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return dst, engine.ErrInvalidQueueName
		}
	}
	return dst, nil
}

// fail answers err through the error table.
func (s *Server) fail(ctx *fasthttp.RequestCtx, st *reqState, err error) {
	code, msg, known := classify(err)
	if !known && s.failedLog.due() {
		// At most a line a second: a failed log refused every request
		// with its cause, 9,000 lines a second under load (faults2
		// audit, 2026-12-07); smqd_http_errors_total counts them all.
		s.log.Error("request failed", "op", st.op.String(), "err", err, "request_id", string(st.reqID),
			"suppressed_since_last", s.failedLog.suppressed.Swap(0))
	}
	if code == codeMessageNotExist && st.op.isReceive() && errors.Is(err, engine.ErrMessageNotExist) {
		msg = "message not exist"
	}
	s.writeError(ctx, st, code, msg)
}

// writeError writes the <Error> document of spec §3.11 and counts it (a
// forwarded request's is counted by the node that forwarded it).
func (s *Server) writeError(ctx *fasthttp.RequestCtx, st *reqState, code errCode, msg string) {
	if st.fw == nil {
		// A forwarded request's error is counted by the node its client
		// reached, from the answer it relays (forward), as its response
		// is (run).
		s.metrics.countError(code)
	}
	s.writeErrorDoc(ctx, st, code, msg)
}

// writeErrorDoc writes the <Error> document of spec §3.11.
func (s *Server) writeErrorDoc(ctx *fasthttp.RequestCtx, st *reqState, code errCode, msg string) {
	b := appendRootOpen(respBody(ctx), "Error")
	b = appendElem(b, "Code", code.String())
	b = appendElem(b, "Message", xmlSafe(msg))
	b = appendElem(b, "RequestId", st.reqID)
	b = appendOpen(b, "HostId")
	b = append(b, "http://"...)
	b = appendText(b, xmlSafe(string(ctx.Request.Header.Host())))
	b = appendClose(b, "HostId")
	b = appendClose(b, "Error")
	st.out = b
	s.writeBody(ctx, st, code.status())
}

// respBody takes the response's body buffer (fasthttp's, pooled) to encode
// into; writeBody hands it back. Encoding in place costs no copy, and the
// buffer's owner stays fasthttp, which recycles it after writing.
func respBody(ctx *fasthttp.RequestCtx) []byte { return ctx.Response.SwapBody(nil)[:0] }

// writeBody sends st.out, taken from respBody, as the text/xml response
// body with the status.
func (s *Server) writeBody(ctx *fasthttp.RequestCtx, st *reqState, status int) {
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetContentType("text/xml;charset=utf-8")
	ctx.Response.SwapBody(st.out)
	st.out = nil
}

// handleTransportError answers requests fasthttp could not read: bodies
// over the cap, malformed request lines, timeouts. The connection is closed
// afterwards.
func (s *Server) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	st := s.states.Get().(*reqState)
	defer func() { st.release(); s.states.Put(st) }()
	st.reqID = s.appendRequestID(st.reqID[:0], time.Now())
	setCommonHeaders(ctx, st.reqID)
	code, msg := codeInvalidArgument, "the request could not be read: "+err.Error()
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		msg = fmt.Sprintf("the request body is larger than %d bytes", s.opts.MaxRequestBodyBytes)
	case errors.As(err, &small):
		msg = fmt.Sprintf("the request line and headers are larger than %d bytes", readBufferBytes)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		s.log.Debug("request read timeout", "remote", ctx.RemoteAddr().String())
		msg = "timed out reading the request"
	}
	s.writeError(ctx, st, code, msg)
	// Counted with the errors (metrics audit, 2026-12-07); it was never
	// routed, and its time from its start is not known here.
	s.metrics.respond(opUnknown, ctx.Response.StatusCode())
	// fasthttp closes the connection after this answer, maybe with the
	// rest of the request unread: linger, so the client gets the answer.
	for c := ctx.Conn(); c != nil; {
		switch w := c.(type) {
		case *limitConn:
			w.linger.Store(true)
			c = nil
		case *httpsConn:
			c = w.Conn.NetConn()
		case *cluster.HandshakeBudget:
			c = w.Conn
		case *proxyConn:
			c = w.Conn
		default:
			c = nil
		}
	}
}
