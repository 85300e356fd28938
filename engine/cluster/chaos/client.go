package chaos

// A small MNS client for the harness: signed requests (server/mnsauth, the
// code the server verifies with) over net/http, one request at a time per
// call, each bounded by the client's timeout.
//
// Outcomes. Every call classifies its result for the history:
//   - Ok: a 2xx answer (or, for a receive, 404 MessageNotExist: nothing to
//     take, which changed nothing).
//   - Fail: the request certainly did not run: the connection could not be
//     made (nothing was sent), or a 4xx answer (the request was refused
//     before it changed anything).
//   - Unknown: anything else — a timeout, a broken connection after the
//     request was sent, a 5xx (503 is also what a leader answers when it
//     lost the lead after proposing: its entry may still commit).
//
// Invariants:
//  1. Every request is signed with the same code the server verifies
//     with, and bounded by the client's timeout (no call waits longer).
//  2. An answer is classified Fail only when the request certainly
//     changed nothing; when in doubt it is Unknown.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/server/mnsauth"
)

// Outcome is what a client knows of an operation once its call returns.
type Outcome uint8

const (
	Pending Outcome = iota // invoked, not yet returned
	Ok                     // it happened
	Fail                   // it certainly did not happen
	Unknown                // it may or may not have happened
)

func (o Outcome) String() string {
	return [...]string{"pending", "ok", "fail", "unknown"}[o]
}

// Client signs and sends MNS requests to one node's API.
type Client struct {
	base string // "http://host:port"
	key  *mnsauth.Key
	hc   *http.Client
}

// NewClient returns a client of the API at addr (HOST:PORT); every
// request is bounded by timeout.
func NewClient(addr, id, secret string, timeout time.Duration) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{base: "http://" + addr, key: mnsauth.NewKey(id, secret), hc: &http.Client{Timeout: timeout, Transport: tr}}
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// apiError is an answer with a status outside 2xx.
type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Msg) }

// errNotSent wraps an error of a request that never left the client.
var errNotSent = errors.New("not sent")

// classify maps a call's error to an Outcome.
func classify(err error) Outcome {
	var ae *apiError
	switch {
	case err == nil:
		return Ok
	case errors.Is(err, errNotSent):
		return Fail
	case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500:
		return Fail
	}
	return Unknown
}

// do sends a signed request; a status outside 2xx is an *apiError.
func (c *Client) do(ctx context.Context, method, target string, body []byte) (int, []byte, error) {
	r, err := http.NewRequestWithContext(ctx, method, c.base+target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > 0 {
		r.Header.Set("Content-Type", "text/xml;charset=utf-8")
		r.Header.Set("Content-MD5", string(mnsauth.AppendContentMD5(nil, body)))
	}
	c.key.SignHTTP(r)
	resp, err := c.hc.Do(r)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return 0, nil, fmt.Errorf("%w: %v", errNotSent, oe)
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}
		xml.Unmarshal(b, &e)
		return resp.StatusCode, b, &apiError{Status: resp.StatusCode, Code: e.Code, Msg: e.Message}
	}
	return resp.StatusCode, b, nil
}

// CreateQueue creates a queue with a visibility timeout (seconds).
func (c *Client) CreateQueue(ctx context.Context, name string, visibility int) error {
	return c.CreateQueueWith(ctx, name, visibility, "", 0)
}

// CreateQueueWith creates a queue with a dead-letter policy (none when
// deadLetter is empty).
func (c *Client) CreateQueueWith(ctx context.Context, name string, visibility int, deadLetter string, maxReceive int) error {
	policy := ""
	if deadLetter != "" {
		policy = fmt.Sprintf("<DeadLetterTargetQueue>%s</DeadLetterTargetQueue><MaxReceiveCount>%d</MaxReceiveCount>", deadLetter, maxReceive)
	}
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Queue xmlns="http://mns.aliyuncs.com/doc/v1/"><VisibilityTimeout>%d</VisibilityTimeout>%s</Queue>`, visibility, policy)
	_, _, err := c.do(ctx, "PUT", "/queues/"+name, []byte(body))
	return err
}

// Send sends one message; it returns its MessageId.
func (c *Client) Send(ctx context.Context, queue, body string) (string, error) {
	return c.postMessage(ctx, "/queues/"+queue+"/messages", body)
}

// postMessage posts a Message document with body to target (a send or a
// publish) and returns the MessageId of the answer.
func (c *Client) postMessage(ctx context.Context, target, body string) (string, error) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Message xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageBody>`)
	xml.EscapeText(&b, []byte(body))
	b.WriteString(`</MessageBody></Message>`)
	_, resp, err := c.do(ctx, "POST", target, b.Bytes())
	if err != nil {
		return "", err
	}
	var m struct {
		MessageID string `xml:"MessageId"`
	}
	if err := xml.Unmarshal(resp, &m); err != nil || m.MessageID == "" {
		return "", fmt.Errorf("POST %s: an answer without a MessageId: %q", target, resp)
	}
	return m.MessageID, nil
}

// CreateTopic creates a topic with the default attributes.
func (c *Client) CreateTopic(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, "PUT", "/topics/"+name, []byte(`<?xml version="1.0" encoding="UTF-8"?><Topic xmlns="http://mns.aliyuncs.com/doc/v1/"></Topic>`))
	return err
}

// Subscribe subscribes queue to topic as sub, in the SIMPLIFIED format: a
// delivery's body is the published body.
func (c *Client) Subscribe(ctx context.Context, topic, sub, queue string) error {
	return c.subscribe(ctx, topic, sub, "acs:mns:cn-chaos:1:queues/"+queue)
}

// SubscribeHTTP subscribes the HTTP endpoint url to topic as sub, in the
// SIMPLIFIED format: a push's body is the published body.
func (c *Client) SubscribeHTTP(ctx context.Context, topic, sub, url string) error {
	return c.subscribe(ctx, topic, sub, url)
}

func (c *Client) subscribe(ctx context.Context, topic, sub, endpoint string) error {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Subscription xmlns="http://mns.aliyuncs.com/doc/v1/"><Endpoint>`)
	xml.EscapeText(&b, []byte(endpoint))
	b.WriteString(`</Endpoint><NotifyContentFormat>SIMPLIFIED</NotifyContentFormat></Subscription>`)
	_, _, err := c.do(ctx, "PUT", "/topics/"+topic+"/subscriptions/"+sub, b.Bytes())
	return err
}

// Publish publishes one message to a topic; it returns its MessageId.
func (c *Client) Publish(ctx context.Context, topic, body string) (string, error) {
	return c.postMessage(ctx, "/topics/"+topic+"/messages", body)
}

// MessageCount returns a topic's MessageCount (GetTopicAttributes).
func (c *Client) MessageCount(ctx context.Context, topic string) (int, error) {
	_, resp, err := c.do(ctx, "GET", "/topics/"+topic, nil)
	if err != nil {
		return 0, err
	}
	var a struct {
		MessageCount int `xml:"MessageCount"`
	}
	if err := xml.Unmarshal(resp, &a); err != nil {
		return 0, fmt.Errorf("topic attributes: %v: %q", err, resp)
	}
	return a.MessageCount, nil
}

// Received is one message of a receive.
type Received struct {
	MessageID    string `xml:"MessageId"`
	Handle       string `xml:"ReceiptHandle"`
	Body         string `xml:"MessageBody"`
	DequeueCount int    `xml:"DequeueCount"`
}

// Receive takes up to max messages, waiting up to wait seconds for one. An
// empty queue is no error (nil, nil).
func (c *Client) Receive(ctx context.Context, queue string, max, wait int) ([]Received, error) {
	_, resp, err := c.do(ctx, "GET", fmt.Sprintf("/queues/%s/messages?numOfMessages=%d&waitseconds=%d", queue, max, wait), nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == 404 && ae.Code == "MessageNotExist" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ms struct {
		Messages []Received `xml:"Message"`
	}
	if err := xml.Unmarshal(resp, &ms); err != nil {
		return nil, fmt.Errorf("receive: %v: %q", err, resp)
	}
	return ms.Messages, nil
}

// Delete deletes a message by its receipt handle.
func (c *Client) Delete(ctx context.Context, queue, handle string) error {
	_, _, err := c.do(ctx, "DELETE", "/queues/"+queue+"/messages?ReceiptHandle="+url.QueryEscape(handle), nil)
	return err
}

// Status returns the node's view of the cluster (GET /cluster).
func (c *Client) Status(ctx context.Context) (cluster.Status, error) {
	var st cluster.Status
	_, b, err := c.do(ctx, "GET", "/cluster", nil)
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(b, &st)
	return st, err
}

// Healthy reports whether the node's /healthz says it can serve every
// shard.
func (c *Client) Healthy(ctx context.Context) bool {
	status, _, err := c.do(ctx, "GET", "/healthz", nil)
	return err == nil && status == 200
}

// Member adds node id with Raft address raft, or removes it when raft is
// "", through this node (PUT or DELETE /cluster/nodes/{id}, signed). A
// change refused while a shard elects a leader is tried again until ctx
// ends. An attempt that got no answer (the client's timeout) or a 503 may
// have made the change all the same; a later attempt then finds it made
// ("is not a member", "is a member already"), which is success.
func (c *Client) Member(ctx context.Context, id int, raft string) error {
	method, target := "DELETE", fmt.Sprintf("/cluster/nodes/%d", id)
	made := "is not a member"
	if raft != "" {
		method, target = "PUT", fmt.Sprintf("/cluster/nodes/%d?raft=%s", id, url.QueryEscape(raft))
		made = "is a member already"
	}
	maybeMade := false
	for {
		_, _, err := c.do(ctx, method, target, nil)
		if err == nil {
			return nil
		}
		var ae *apiError
		isAPI := errors.As(err, &ae)
		if isAPI && ae.Status == 400 && strings.Contains(ae.Msg, made) {
			if maybeMade {
				return nil
			}
			return fmt.Errorf("%s %s: %w", method, target, err) // nothing to retry
		}
		if !isAPI || ae.Status >= 500 {
			maybeMade = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", method, target, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
