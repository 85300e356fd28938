package bench

// The MNS wire-protocol target: smqd (or any MNS-compatible server) over
// HTTP/1.1 keep-alive through one fasthttp.HostClient shared by all
// workers. Every request is signed per spec §2.2 with package mnsauth, the
// code the server verifies with. Batch size 1 uses the
// single operations (SendMessage, ReceiveMessage, DeleteMessage), larger
// batches the Batch* forms. Request bodies are appended into per-client
// buffers and responses are read with the scanner in scanner.go, so the hot
// path allocates nothing once the buffers have grown.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/smqd/smqd/server/mnsauth"
	"github.com/valyala/fasthttp"
)

// MNSOptions configures the MNS target.
type MNSOptions struct {
	Addr            string // host:port of the server
	AccessKeyID     string
	AccessKeySecret string
	// MaxConns bounds the keep-alive connections (one per worker is right).
	MaxConns int
	// RequestTimeout bounds a request other than a long poll; a long poll
	// gets its wait on top. Default 10 s.
	RequestTimeout time.Duration
	// VisibilityTimeout of the queues Prepare creates; default 30 s.
	VisibilityTimeout time.Duration
	// ContentMD5 adds the Go SDK's Content-MD5 (base64 of the hex MD5) to
	// requests with a body; off by default (the Java SDK never sends it).
	ContentMD5 bool
}

// MNSTarget drives an MNS-compatible server over HTTP.
type MNSTarget struct {
	opts  MNSOptions
	hc    *fasthttp.HostClient
	key   *mnsauth.Key
	names []string
	topic string // the publish workload's topic (PrepareTopic)
	admMu sync.Mutex
	adm   *mnsClient // admin requests (Prepare, Backlog); guarded by admMu
}

// NewMNSTarget returns a target for the server at opts.Addr.
func NewMNSTarget(opts MNSOptions) *MNSTarget {
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.VisibilityTimeout <= 0 {
		opts.VisibilityTimeout = 30 * time.Second
	}
	t := &MNSTarget{
		opts: opts,
		key:  mnsauth.NewKey(opts.AccessKeyID, opts.AccessKeySecret),
		hc: &fasthttp.HostClient{
			Addr:                      opts.Addr,
			MaxConns:                  opts.MaxConns + 2,
			MaxIdleConnDuration:       time.Minute,
			NoDefaultUserAgentHeader:  true,
			DisablePathNormalizing:    true,
			MaxIdemponentCallAttempts: 1, // never resend: a resent receive would hide messages
			ReadBufferSize:            64 << 10,
			WriteBufferSize:           64 << 10,
		},
	}
	t.adm = t.newClient()
	return t
}

// Name returns "smqd".
func (t *MNSTarget) Name() string { return "smqd" }

// Prepare creates the queues (deleting them first when fresh).
func (t *MNSTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	t.names = names
	t.admMu.Lock()
	defer t.admMu.Unlock()
	c := t.adm
	for _, n := range names {
		if fresh {
			st, body, err := c.do("DELETE", "/queues/"+n, nil, 0)
			if err != nil {
				return fmt.Errorf("delete queue %s: %w", n, err)
			}
			if st != 204 && st != 404 {
				return fmt.Errorf("delete queue %s: status %d %s", n, st, ErrorCode(body))
			}
		}
		vt := int(t.opts.VisibilityTimeout / time.Second)
		body := []byte(`<?xml version="1.0" encoding="UTF-8"?><Queue xmlns="http://mns.aliyuncs.com/doc/v1/"><VisibilityTimeout>` + strconv.Itoa(vt) + `</VisibilityTimeout></Queue>`)
		st, rb, err := c.do("PUT", "/queues/"+n, body, 0)
		if err != nil {
			return fmt.Errorf("create queue %s: %w", n, err)
		}
		if st != 201 && st != 204 && !(st == 409 && !fresh) {
			return fmt.Errorf("create queue %s: status %d %s", n, st, ErrorCode(rb))
		}
	}
	return nil
}

// Backlog returns Active+Inactive+Delayed of queue i (GetQueueAttributes).
func (t *MNSTarget) Backlog(ctx context.Context, i int) (int64, error) {
	a, err := t.Attributes(ctx, t.names[i])
	if err != nil {
		return 0, err
	}
	return a.Active + a.Inactive + a.Delayed, nil
}

// QueueCounts are the counters of GetQueueAttributes.
type QueueCounts struct{ Active, Inactive, Delayed int64 }

// Attributes returns the message counts of the named queue.
func (t *MNSTarget) Attributes(ctx context.Context, name string) (QueueCounts, error) {
	t.admMu.Lock()
	defer t.admMu.Unlock()
	st, body, err := t.adm.do("GET", "/queues/"+name, nil, 0)
	if err != nil {
		return QueueCounts{}, err
	}
	if st != 200 {
		return QueueCounts{}, fmt.Errorf("get queue attributes %s: status %d %s", name, st, ErrorCode(body))
	}
	var q QueueCounts
	var ok1, ok2, ok3 bool
	q.Active, ok1 = ElementInt(body, "ActiveMessages")
	q.Inactive, ok2 = ElementInt(body, "InactiveMessages")
	q.Delayed, ok3 = ElementInt(body, "DelayMessages")
	if !ok1 || !ok2 || !ok3 {
		return q, fmt.Errorf("get queue attributes %s: counters missing in %q", name, body)
	}
	return q, nil
}

// Close closes idle connections.
func (t *MNSTarget) Close() error {
	t.hc.CloseIdleConnections()
	return nil
}

// NewClient returns a worker's client.
func (t *MNSTarget) NewClient(ctx context.Context) (Client, error) { return t.newClient(), nil }

func (t *MNSTarget) newClient() *mnsClient {
	c := &mnsClient{
		t:       t,
		req:     fasthttp.AcquireRequest(),
		resp:    fasthttp.AcquireResponse(),
		xmns:    []mnsauth.Header{{Name: []byte("x-mns-version"), Value: []byte(mnsauth.APIVersion)}},
		sts:     make([]byte, 0, 512),
		uri:     make([]byte, 0, 256),
		body:    make([]byte, 0, 32<<10),
		auth:    make([]byte, 0, 128),
		handles: make([]byte, 0, 16*64),
	}
	return c
}

// mnsClient is one worker's request state. Owned by one goroutine.
type mnsClient struct {
	t      *MNSTarget
	req    *fasthttp.Request
	resp   *fasthttp.Response
	date   dateCache        // the Date header, formatted once a second
	xmns   []mnsauth.Header // the signed x-mns-* headers: x-mns-version
	sts    []byte           // string-to-sign scratch
	method []byte           // the method, for the string to sign
	dateB  []byte           // the date, for the string to sign
	uri    []byte           // request target (path and query), also the signed resource
	body   []byte           // request body scratch
	auth   []byte           // Authorization value scratch
	md5    []byte           // Content-MD5 scratch
	scan   MessageScanner
	// pending receipt handles, oldest first: handles holds their bytes
	// back to back, ends the end offset of each.
	handles []byte
	ends    []int
	queue   int // queue of the pending handles
}

const (
	xmlDecl   = `<?xml version="1.0" encoding="UTF-8"?>`
	xmlNS     = ` xmlns="http://mns.aliyuncs.com/doc/v1/"`
	ctypeXML  = "text/xml;charset=UTF-8"
	errStatus = "bench: status %d %s"
)

// do sends one signed request; uri is the request target. The returned
// body is valid until the next request of c.
func (c *mnsClient) do(method, uri string, body []byte, wait time.Duration) (int, []byte, error) {
	c.uri = append(c.uri[:0], uri...)
	return c.doURI(method, body, wait)
}

// doURI sends one signed request to c.uri.
func (c *mnsClient) doURI(method string, body []byte, wait time.Duration) (int, []byte, error) {
	req, resp := c.req, c.resp
	req.Reset()
	resp.Reset()
	req.Header.SetMethod(method)
	req.SetRequestURIBytes(c.uri)
	req.Header.SetHost(c.t.opts.Addr)
	date := c.date.get(time.Now())
	req.Header.Set("Date", date)
	req.Header.Set("x-mns-version", mnsauth.APIVersion)
	c.method = append(c.method[:0], method...)
	c.dateB = append(c.dateB[:0], date...)
	in := mnsauth.Request{
		Method:   c.method,
		Date:     c.dateB,
		Headers:  c.xmns,
		Resource: c.uri,
	}
	if body != nil {
		in.ContentType = ctypeXMLBytes
		req.Header.SetContentType(ctypeXML)
		if c.t.opts.ContentMD5 {
			c.md5 = mnsauth.AppendContentMD5(c.md5[:0], body)
			in.ContentMD5 = c.md5
			req.Header.SetBytesV("Content-MD5", c.md5)
		}
		req.SetBodyRaw(body)
	}
	c.sts = mnsauth.AppendStringToSign(c.sts[:0], &in)
	c.auth = c.t.key.AppendAuthorization(c.auth[:0], c.sts)
	req.Header.SetBytesV("Authorization", c.auth)
	err := c.t.hc.DoTimeout(req, resp, c.t.opts.RequestTimeout+wait)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), resp.Body(), nil
}

// ctypeXMLBytes is ctypeXML for the string to sign; never written to.
var ctypeXMLBytes = []byte(ctypeXML)

// dateCache formats the HTTP Date header once per second.
type dateCache struct {
	sec int64
	s   string
}

func (c *dateCache) get(now time.Time) string {
	if sec := now.Unix(); sec != c.sec || c.s == "" {
		c.sec = sec
		c.s = mnsauth.FormatDate(now)
	}
	return c.s
}

func (c *mnsClient) messagesURI(i int) {
	c.uri = append(c.uri[:0], "/queues/"...)
	c.uri = append(c.uri, c.t.names[i]...)
	c.uri = append(c.uri, "/messages"...)
}

// Send sends one SendMessage (one message) or BatchSendMessage.
func (c *mnsClient) Send(ctx context.Context, i int, msgs []Outgoing) (int, error) {
	b := append(c.body[:0], xmlDecl...)
	if len(msgs) == 1 {
		b = appendMessage(append(b, "<Message"+xmlNS+">"...), &msgs[0])
		b = append(b, "</Message>"...)
	} else {
		b = append(b, "<Messages"+xmlNS+">"...)
		for k := range msgs {
			b = appendMessage(append(b, "<Message>"...), &msgs[k])
			b = append(b, "</Message>"...)
		}
		b = append(b, "</Messages>"...)
	}
	c.body = b
	c.messagesURI(i)
	st, rb, err := c.doURI("POST", b, 0)
	if err != nil {
		return 0, err
	}
	if st != 201 {
		if len(msgs) > 1 && st >= 400 {
			// Partial failure: entries with MessageId were stored.
			ok, failed := 0, 0
			var code []byte
			var m ScannedMessage
			c.scan.Reset(rb)
			for c.scan.Next(&m) {
				if len(m.MessageID) > 0 {
					ok++
				} else {
					failed++
					if code == nil {
						code = m.ErrorCode
					}
				}
			}
			if failed > 0 {
				return ok, &PartialError{Failed: failed, Code: string(code)}
			}
		}
		return 0, fmt.Errorf(errStatus, st, ErrorCode(rb))
	}
	return len(msgs), nil
}

// appendMessage appends a Message entry's children.
func appendMessage(b []byte, m *Outgoing) []byte {
	b = append(b, "<MessageBody>"...)
	b = append(b, m.Body...) // [0-9a-z]: nothing to escape
	b = append(b, "</MessageBody>"...)
	if m.Delay > 0 {
		b = append(b, "<DelaySeconds>"...)
		b = strconv.AppendInt(b, int64(m.Delay), 10)
		b = append(b, "</DelaySeconds>"...)
	}
	if m.Priority > 0 {
		b = append(b, "<Priority>"...)
		b = strconv.AppendInt(b, int64(m.Priority), 10)
		b = append(b, "</Priority>"...)
	}
	return b
}

// Receive sends one ReceiveMessage (max 1) or BatchReceiveMessage with
// waitseconds (whole seconds, rounded up).
func (c *mnsClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if c.Pending() > 0 && c.queue != i {
		return 0, errors.New("bench: receive from another queue with deletes pending")
	}
	c.queue = i
	c.messagesURI(i)
	sep := byte('?')
	if max > 1 {
		c.uri = append(c.uri, "?numOfMessages="...)
		c.uri = strconv.AppendInt(c.uri, int64(max), 10)
		sep = '&'
	}
	ws := int64((wait + time.Second - 1) / time.Second)
	if ws > 0 {
		c.uri = append(c.uri, sep)
		c.uri = append(c.uri, "waitseconds="...)
		c.uri = strconv.AppendInt(c.uri, ws, 10)
	}
	st, rb, err := c.doURI("GET", nil, time.Duration(ws)*time.Second)
	if err != nil {
		return 0, err
	}
	switch st {
	case 200:
	case 404:
		if code := ErrorCode(rb); string(code) == "MessageNotExist" {
			return 0, nil
		}
		return 0, fmt.Errorf(errStatus, st, ErrorCode(rb))
	default:
		return 0, fmt.Errorf(errStatus, st, ErrorCode(rb))
	}
	n := 0
	var m ScannedMessage
	c.scan.Reset(rb)
	for c.scan.Next(&m) {
		if len(m.ReceiptHandle) == 0 {
			continue
		}
		c.handles = append(c.handles, m.ReceiptHandle...)
		c.ends = append(c.ends, len(c.handles))
		if fn != nil {
			fn(m.MessageBody)
		}
		n++
	}
	if n == 0 {
		return 0, errors.New("bench: 200 response without messages")
	}
	return n, nil
}

// Pending returns the number of handles not yet deleted.
func (c *mnsClient) Pending() int { return len(c.ends) }

// Delete sends one DeleteMessage (n == 1) or BatchDeleteMessage for the
// oldest n pending handles.
func (c *mnsClient) Delete(ctx context.Context, n int) (int, error) {
	if n > len(c.ends) {
		n = len(c.ends)
	}
	if n == 0 {
		return 0, nil
	}
	end := c.ends[n-1]
	c.messagesURI(c.queue)
	var st int
	var rb []byte
	var err error
	if n == 1 {
		c.uri = append(c.uri, "?ReceiptHandle="...)
		c.uri = append(c.uri, c.handles[:end]...) // [A-Za-z0-9-]: no escaping needed
		st, rb, err = c.doURI("DELETE", nil, 0)
	} else {
		b := append(c.body[:0], xmlDecl...)
		b = append(b, "<ReceiptHandles"+xmlNS+">"...)
		start := 0
		for k := 0; k < n; k++ {
			b = append(b, "<ReceiptHandle>"...)
			b = append(b, c.handles[start:c.ends[k]]...)
			b = append(b, "</ReceiptHandle>"...)
			start = c.ends[k]
		}
		b = append(b, "</ReceiptHandles>"...)
		c.body = b
		st, rb, err = c.doURI("DELETE", b, 0)
	}
	// Drop the n handles whatever happened: a failed delete is not retried
	// (the message comes back after its visibility timeout).
	rest := copy(c.handles, c.handles[end:])
	c.handles = c.handles[:rest]
	for k := n; k < len(c.ends); k++ {
		c.ends[k-n] = c.ends[k] - end
	}
	c.ends = c.ends[:len(c.ends)-n]
	if err != nil {
		return 0, err
	}
	switch {
	case st == 204:
		return n, nil
	case st == 404 && n > 1:
		failed, code := BatchErrorCodes(rb)
		if failed > 0 {
			return n - failed, &PartialError{Failed: failed, Code: string(code)}
		}
	}
	return 0, fmt.Errorf(errStatus, st, ErrorCode(rb))
}

// Close releases the request and response.
func (c *mnsClient) Close() error {
	fasthttp.ReleaseRequest(c.req)
	fasthttp.ReleaseResponse(c.resp)
	c.req, c.resp = nil, nil
	return nil
}
