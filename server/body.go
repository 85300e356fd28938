package server

// Request bodies: authenticated before they are read, read within a cap,
// and drained when refused.
//
// The signature covers headers only (Content-MD5 stands in for the body,
// spec §2.2), so a request is authenticated before its body is read. The
// fasthttp server runs with StreamRequestBody: it reads the headers and at
// most 8 KiB of body before calling the handler, under HeaderTimeout. The
// handler then, in this order:
//
//  1. routes, and checks the headers: signature, date, version, and
//     Content-Length against MaxRequestBodyBytes (checkHeaders);
//  2. only if they pass, extends the read deadline by ReadTimeout and reads
//     the body, growing its buffer as bytes arrive (a declared length
//     reserves nothing), refusing a chunked body the moment it passes the
//     cap (readBody);
//  3. checks Content-MD5 against the body when the header is present.
//
// A request refused before its body was read (steps 1 and 2) is answered
// with the error and Connection: close, after its body is read and thrown
// away, up to drainLimit bytes within HeaderTimeout (refuse). Draining
// costs a small fixed buffer, not the body; it is what lets a client that
// writes its whole body before it reads (Node's http, most SDKs) see the
// answer rather than a connection reset.
//
// Expect: 100-continue (the Java SDK) gets the same checks before the
// server asks for the body (expect): a refused request is answered at once,
// without 100 Continue, and its body is never sent.
//
// Memory before authentication is therefore bounded per connection by the
// read buffer, the 8 KiB prefetch and the drain buffer, and in total by
// MaxConns; nothing scales with a declared Content-Length.

import (
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/smqd/smqd/server/mnsauth"
	"github.com/valyala/fasthttp"
)

// prefetchBytes is how much of a body fasthttp reads with the headers when
// streaming (its fixed pre-read size).
const prefetchBytes = 8 << 10

// errBodyTooLarge is answered for a body over MaxRequestBodyBytes.
func (s *Server) errBodyTooLarge() error {
	return newAPIError(codeInvalidArgument, "the request body is larger than "+strconv.Itoa(s.opts.MaxRequestBodyBytes)+" bytes")
}

// hasBody reports whether the request declares a body (a length above 0, or
// chunked).
func hasBody(h *fasthttp.RequestHeader) bool {
	cl := h.ContentLength()
	return cl > 0 || cl == -1
}

// checkHeaders is everything decided before a body byte is read:
// authentication, then the declared body size.
func (s *Server) checkHeaders(ctx *fasthttp.RequestCtx, st *reqState, target []byte) error {
	if err := s.auth.check(&ctx.Request.Header, target, &st.auth); err != nil {
		return err
	}
	if ctx.Request.Header.ContentLength() > s.opts.MaxRequestBodyBytes {
		return s.errBodyTooLarge()
	}
	return nil
}

// readBody reads the request body into st.body. An error is an *apiError
// (over the cap) or a transport error (timeout, truncated body).
func (s *Server) readBody(ctx *fasthttp.RequestCtx, st *reqState) error {
	st.body = nil
	h := &ctx.Request.Header
	cl := h.ContentLength()
	if cl == 0 || cl == -2 {
		return nil
	}
	stream := ctx.RequestBodyStream()
	if stream == nil {
		// Not streamed (a RequestCtx built by hand, as in benchmarks).
		b := ctx.Request.Body()
		if len(b) > s.opts.MaxRequestBodyBytes {
			return s.errBodyTooLarge()
		}
		st.body = b
		return nil
	}
	if cl < 0 || cl > prefetchBytes {
		// The rest of the body has not arrived yet: give it ReadTimeout.
		if err := ctx.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout)); err != nil {
			return err
		}
	}
	b, err := readLimited(stream, st.bodyBuf[:0], cl, s.opts.MaxRequestBodyBytes)
	st.bodyBuf = b
	if errors.Is(err, errOverCap) {
		return s.errBodyTooLarge()
	}
	if err != nil {
		return err
	}
	st.body = b
	return nil
}

var errOverCap = errors.New("body over the cap")

// readLimited appends a body of declared length want (-1: unknown) from r
// to buf, growing buf only as bytes arrive. A body of unknown length fails
// with errOverCap once it passes limit; one that ends before want bytes
// fails with io.ErrUnexpectedEOF.
func readLimited(r io.Reader, buf []byte, want, limit int) ([]byte, error) {
	end := want
	if want < 0 {
		end = limit + 1
	}
	for {
		if want >= 0 && len(buf) == want {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			n := min(max(2*cap(buf), 16<<10), end)
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if want < 0 && len(buf) > limit {
			return buf, errOverCap
		}
		if err == io.EOF {
			if want >= 0 && len(buf) < want {
				return buf, io.ErrUnexpectedEOF
			}
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// refuse answers err for a request whose body was not read. If it declares
// a body, the body is drained first (up to drainLimit bytes, within
// HeaderTimeout) and the connection closed after the answer: the request
// is not trusted to be followed by a well-framed next one.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, st *reqState, err error) {
	if hasBody(&ctx.Request.Header) {
		s.discardBody(ctx)
		ctx.SetConnectionClose()
	}
	s.fail(ctx, st, err)
}

// refuseAuthenticated answers err for an authenticated request whose body
// was not read (its policies or its rate refuse it): the body is drained
// as refuse drains it, and the connection is kept if it ended there. A
// body already in memory (a forwarded request) needs nothing.
func (s *Server) refuseAuthenticated(ctx *fasthttp.RequestCtx, st *reqState, err error) {
	if hasBody(&ctx.Request.Header) && ctx.RequestBodyStream() != nil && !s.discardBody(ctx) {
		ctx.SetConnectionClose()
	}
	s.fail(ctx, st, err)
}

// discardBody reads and drops the request body, up to drainLimit bytes,
// within HeaderTimeout. It reports whether the body ended.
func (s *Server) discardBody(ctx *fasthttp.RequestCtx) bool {
	cl := ctx.Request.Header.ContentLength()
	stream := ctx.RequestBodyStream()
	if stream == nil || cl > drainLimit {
		return false
	}
	if err := ctx.SetReadDeadline(time.Now().Add(s.opts.HeaderTimeout)); err != nil {
		return false
	}
	n, err := io.CopyN(io.Discard, stream, drainLimit+1)
	return err == io.EOF && n <= drainLimit
}

// expect is fasthttp's ExpectHandler, for requests with Expect:
// 100-continue: it runs checkHeaders before the client sends the body. A
// refused request is answered (error XML, Connection: close) without 100
// Continue; the handler is then not called.
func (s *Server) expect(ctx *fasthttp.RequestCtx) int {
	target := mnsauth.StripAbsoluteForm(ctx.Request.Header.RequestURI())
	path, _, _ := splitTarget(target)
	r := route(ctx.Request.Header.Method(), path)
	switch r.op {
	case opUnknown, opHealthz, opMetrics, opConsole, opPushCert:
		return fasthttp.StatusContinue // answered by the handler
	}
	start := time.Now()
	st := s.states.Get().(*reqState)
	defer func() { st.release(); s.states.Put(st) }()
	st.op = r.op
	// The id first: a refusal by policy is logged with it (authz.go), and
	// a pooled state holds an earlier request's until it is given.
	st.reqID = s.appendRequestID(st.reqID[:0], start)
	var err error
	if s.opts.NoAuth && crossSite(&ctx.Request.Header) {
		err = newAPIError(codeAccessDenied, "cross-site requests are refused, and with --no-auth any under a host name other than localhost")
	} else {
		err = s.checkHeaders(ctx, st, target)
	}
	if err == nil && s.pol.Load() != nil {
		// A request its key's policies refuse is refused before its body
		// is sent (a send: if the key may do neither form; authz.go).
		_, rawQuery, _ := splitTarget(target)
		if st.qbuf, err = parseQuery(rawQuery, &st.query, st.qbuf); err == nil {
			st.op = refinedOp(r.op, &st.query)
			st.tls = s.secureTransport(ctx)
			s.noteSource(ctx, st)
			err = s.authorize(st, &r)
		}
	}
	if err == nil {
		return fasthttp.StatusContinue
	}
	setCommonHeaders(ctx, st.reqID)
	s.fail(ctx, st, err)
	status := ctx.Response.StatusCode()
	s.metrics.observe(st.op, status, time.Since(start))
	return status
}
