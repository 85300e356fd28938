package bench

// The SDK-like MNS client (smqbench --client sdk): the same operations and
// batch sizes as the fasthttp client in mns.go, but each request made the
// way the MNS SDKs make it, so that the client's CPU per message is what
// an application would spend, not what a tuned load generator spends:
//
//   - one net/http Client for the whole process with a clone of
//     http.DefaultTransport (keep-alive, default dial and idle timeouts),
//     MaxIdleConns and MaxIdleConnsPerHost raised to 512, and a 35 s request
//     timeout. Those are the official Go SDK's figures
//     (aliyun/aliyun-mns-go-sdk client.go: DefaultMaxConnsPerHost 512,
//     DefaultTimeout 35 s); that SDK itself sits on fasthttp.Client, and
//     net/http is what other Go MNS clients use (e.g. xiaojiaoyu100/aliyun-mns
//     raises MaxIdleConnsPerHost on http.DefaultTransport). Without the
//     raise, net/http keeps 2 idle connections per host and 16 workers would
//     reconnect all the time, which no SDK user sees;
//   - the request body marshalled by encoding/xml from request structs
//     (Message with MessageBody, DelaySeconds and Priority always present;
//     Messages; ReceiptHandles), no XML declaration, no namespace;
//   - headers in a map as the SDK sets them: x-mns-version, Content-Type
//     application/xml, a Content-MD5 of every body (empty ones too), Date
//     formatted per request; signed by mnsauth (Key.SignHTTP, the code the
//     server verifies with) over those headers;
//   - the whole response read (io.ReadAll) and decoded by an xml.Decoder
//     into response structs; error bodies decoded into an Error struct.
//
// Admin requests (queue creation and counts) go through the fasthttp
// target: they are not on the measured path.

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/smqd/smqd/server/mnsauth"
)

// SDK-like client settings (see the file comment).
const (
	sdkMaxIdleConnsPerHost = 512
	sdkTimeout             = 35 * time.Second
	sdkContentType         = "application/xml"
	sdkDefaultPriority     = 8 // the SDK sends Priority always; its examples use 8
)

// SDKTarget drives an MNS server with net/http and encoding/xml as the MNS
// SDKs do. Its name is "smqd", like the fasthttp target's; the result's
// Client field tells them apart.
type SDKTarget struct {
	*MNSTarget // Prepare, Backlog, Attributes
	hc         *http.Client
	base       string // "http://host:port/"
}

// NewSDKTarget returns an SDK-like target for the server at opts.Addr
// (opts.MaxConns and opts.ContentMD5 apply only to the admin requests: the
// SDK-like client always sends Content-MD5 and keeps up to 512 idle
// connections).
func NewSDKTarget(opts MNSOptions) *SDKTarget {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = sdkMaxIdleConnsPerHost
	tr.MaxIdleConnsPerHost = sdkMaxIdleConnsPerHost
	return &SDKTarget{
		MNSTarget: NewMNSTarget(opts),
		hc:        &http.Client{Transport: tr, Timeout: sdkTimeout},
		base:      "http://" + opts.Addr + "/",
	}
}

// Close closes the idle connections of both clients.
func (t *SDKTarget) Close() error {
	t.hc.CloseIdleConnections()
	return t.MNSTarget.Close()
}

// NewClient returns a worker's SDK-like client.
func (t *SDKTarget) NewClient(ctx context.Context) (Client, error) {
	return &sdkClient{t: t}, nil
}

// Request and response bodies, shaped as the SDKs' (spec §3.5-§3.7).
type (
	sdkSendRequest struct {
		XMLName      xml.Name `xml:"Message"`
		MessageBody  string   `xml:"MessageBody"`
		DelaySeconds int64    `xml:"DelaySeconds"`
		Priority     int64    `xml:"Priority"`
	}
	sdkBatchSendRequest struct {
		XMLName  xml.Name         `xml:"Messages"`
		Messages []sdkSendRequest `xml:"Message"`
	}
	sdkReceiptHandles struct {
		XMLName        xml.Name `xml:"ReceiptHandles"`
		ReceiptHandles []string `xml:"ReceiptHandle"`
	}
	sdkSendResponse struct {
		XMLName        xml.Name `xml:"Message"`
		MessageID      string   `xml:"MessageId"`
		MessageBodyMD5 string   `xml:"MessageBodyMD5"`
		ReceiptHandle  string   `xml:"ReceiptHandle,omitempty"`
	}
	sdkBatchSendEntry struct {
		ErrorCode      string `xml:"ErrorCode,omitempty"`
		ErrorMessage   string `xml:"ErrorMessage,omitempty"`
		MessageID      string `xml:"MessageId,omitempty"`
		MessageBodyMD5 string `xml:"MessageBodyMD5,omitempty"`
	}
	sdkBatchSendResponse struct {
		XMLName  xml.Name            `xml:"Messages"`
		Messages []sdkBatchSendEntry `xml:"Message"`
	}
	sdkReceiveResponse struct {
		MessageID        string `xml:"MessageId"`
		ReceiptHandle    string `xml:"ReceiptHandle"`
		MessageBodyMD5   string `xml:"MessageBodyMD5"`
		MessageBody      string `xml:"MessageBody"`
		EnqueueTime      int64  `xml:"EnqueueTime"`
		NextVisibleTime  int64  `xml:"NextVisibleTime"`
		FirstDequeueTime int64  `xml:"FirstDequeueTime"`
		DequeueCount     int64  `xml:"DequeueCount"`
		Priority         int64  `xml:"Priority"`
	}
	sdkBatchReceiveResponse struct {
		XMLName  xml.Name             `xml:"Messages"`
		Messages []sdkReceiveResponse `xml:"Message"`
	}
	sdkErrorResponse struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string   `xml:"Code"`
		Message   string   `xml:"Message"`
		RequestID string   `xml:"RequestId"`
		HostID    string   `xml:"HostId"`
	}
	sdkDeleteErrors struct {
		XMLName xml.Name `xml:"Errors"`
		Errors  []struct {
			ErrorCode     string `xml:"ErrorCode"`
			ErrorMessage  string `xml:"ErrorMessage"`
			ReceiptHandle string `xml:"ReceiptHandle"`
		} `xml:"Error"`
	}
)

// sdkClient is one worker. Owned by one goroutine.
type sdkClient struct {
	t       *SDKTarget
	pending []string // receipt handles, oldest first
	queue   int      // queue of the pending handles
}

func (c *sdkClient) Close() error { return nil }

// send makes one request as an SDK does: marshal msg (nil: no body), set
// the headers, sign, send, read the whole response.
func (c *sdkClient) send(ctx context.Context, method, resource string, msg any) (int, []byte, error) {
	var body []byte
	if msg != nil {
		b, err := xml.Marshal(msg)
		if err != nil {
			return 0, nil, fmt.Errorf("marshal: %w", err)
		}
		body = b
	}
	headers := map[string]string{
		"x-mns-version": mnsauth.APIVersion,
		"Content-Type":  sdkContentType,
		"Content-MD5":   string(mnsauth.AppendContentMD5(nil, body)),
		"Date":          time.Now().UTC().Format(http.TimeFormat),
	}
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.t.base+resource, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c.t.key.SignHTTP(req)
	resp, err := c.t.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, rb, nil
}

// decode decodes an XML body into v as the SDK's decoder does.
func sdkDecode(b []byte, v any) error {
	return xml.NewDecoder(bytes.NewReader(b)).Decode(v)
}

// sdkError turns an error response into an error with its MNS code.
func sdkError(st int, b []byte) error {
	var e sdkErrorResponse
	if err := sdkDecode(b, &e); err != nil {
		return fmt.Errorf(errStatus, st, "(undecodable error body)")
	}
	return fmt.Errorf(errStatus, st, e.Code)
}

func (c *sdkClient) resource(i int) string { return "queues/" + c.t.names[i] + "/messages" }

// Send sends one SendMessage (one message) or BatchSendMessage.
func (c *sdkClient) Send(ctx context.Context, i int, msgs []Outgoing) (int, error) {
	entry := func(m *Outgoing) sdkSendRequest {
		p := m.Priority
		if p == 0 {
			p = sdkDefaultPriority
		}
		return sdkSendRequest{MessageBody: string(m.Body), DelaySeconds: int64(m.Delay), Priority: int64(p)}
	}
	if len(msgs) == 1 {
		st, rb, err := c.send(ctx, "POST", c.resource(i), entry(&msgs[0]))
		if err != nil {
			return 0, err
		}
		if st != 201 {
			return 0, sdkError(st, rb)
		}
		var r sdkSendResponse
		if err := sdkDecode(rb, &r); err != nil || r.MessageID == "" {
			return 0, fmt.Errorf("bench: send response %q: %v", rb, err)
		}
		return 1, nil
	}
	req := sdkBatchSendRequest{Messages: make([]sdkSendRequest, len(msgs))}
	for k := range msgs {
		req.Messages[k] = entry(&msgs[k])
	}
	st, rb, err := c.send(ctx, "POST", c.resource(i), &req)
	if err != nil {
		return 0, err
	}
	var r sdkBatchSendResponse
	if st != 201 {
		if st < 400 || sdkDecode(rb, &r) != nil || len(r.Messages) == 0 {
			return 0, sdkError(st, rb)
		}
	} else if err := sdkDecode(rb, &r); err != nil {
		return 0, fmt.Errorf("bench: batch send response: %w", err)
	}
	ok, failed, code := 0, 0, ""
	for _, m := range r.Messages {
		if m.MessageID != "" {
			ok++
		} else {
			failed++
			if code == "" {
				code = m.ErrorCode
			}
		}
	}
	if failed > 0 {
		return ok, &PartialError{Failed: failed, Code: code}
	}
	if ok != len(msgs) {
		return ok, fmt.Errorf("bench: batch send of %d answered with %d entries", len(msgs), ok)
	}
	return ok, nil
}

// Receive sends one ReceiveMessage (max 1) or BatchReceiveMessage with
// waitseconds (whole seconds, rounded up).
func (c *sdkClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if len(c.pending) > 0 && c.queue != i {
		return 0, errors.New("bench: receive from another queue with deletes pending")
	}
	c.queue = i
	res := c.resource(i)
	sep := "?"
	if max > 1 {
		res += "?numOfMessages=" + strconv.Itoa(max)
		sep = "&"
	}
	ws := int64((wait + time.Second - 1) / time.Second)
	if ws > 0 {
		res += sep + "waitseconds=" + strconv.FormatInt(ws, 10)
	}
	st, rb, err := c.send(ctx, "GET", res, nil)
	if err != nil {
		return 0, err
	}
	switch st {
	case 200:
	case 404:
		var e sdkErrorResponse
		if sdkDecode(rb, &e) == nil && e.Code == "MessageNotExist" {
			return 0, nil
		}
		return 0, sdkError(st, rb)
	default:
		return 0, sdkError(st, rb)
	}
	var got []sdkReceiveResponse
	if max > 1 {
		var r sdkBatchReceiveResponse
		if err := sdkDecode(rb, &r); err != nil {
			return 0, fmt.Errorf("bench: batch receive response: %w", err)
		}
		got = r.Messages
	} else {
		var r sdkReceiveResponse
		if err := sdkDecode(rb, &r); err != nil {
			return 0, fmt.Errorf("bench: receive response: %w", err)
		}
		got = append(got, r)
	}
	n := 0
	for k := range got {
		if got[k].ReceiptHandle == "" {
			continue
		}
		c.pending = append(c.pending, got[k].ReceiptHandle)
		if fn != nil {
			fn([]byte(got[k].MessageBody))
		}
		n++
	}
	if n == 0 {
		return 0, errors.New("bench: 200 response without messages")
	}
	return n, nil
}

// Pending returns the number of handles not yet deleted.
func (c *sdkClient) Pending() int { return len(c.pending) }

// Delete sends one DeleteMessage (n == 1) or BatchDeleteMessage for the
// oldest n pending handles.
func (c *sdkClient) Delete(ctx context.Context, n int) (int, error) {
	n = min(n, len(c.pending))
	if n == 0 {
		return 0, nil
	}
	handles := append([]string(nil), c.pending[:n]...)
	// Drop the n handles whatever happens: a failed delete is not retried.
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	var st int
	var rb []byte
	var err error
	if n == 1 {
		st, rb, err = c.send(ctx, "DELETE", c.resource(c.queue)+"?ReceiptHandle="+handles[0], nil)
	} else {
		st, rb, err = c.send(ctx, "DELETE", c.resource(c.queue), &sdkReceiptHandles{ReceiptHandles: handles})
	}
	if err != nil {
		return 0, err
	}
	switch {
	case st == 204:
		return n, nil
	case st == 404 && n > 1:
		var e sdkDeleteErrors
		if sdkDecode(rb, &e) == nil && len(e.Errors) > 0 {
			return n - len(e.Errors), &PartialError{Failed: len(e.Errors), Code: e.Errors[0].ErrorCode}
		}
	}
	return 0, sdkError(st, rb)
}
