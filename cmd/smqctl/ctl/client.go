package ctl

// The signed MNS client: net/http, signed by server/mnsauth (the code the
// server verifies with), XML read with encoding/xml by local names.

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/smqd/smqd/server/mnsauth"
)

const xmlNS = "http://mns.aliyuncs.com/doc/v1/"

// APIError is an error answer of the server.
type APIError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *APIError) Error() string {
	if e.RequestID == "" {
		// Not smqd's answer (a proxy's, a load balancer's): no request id to give.
		return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
	}
	return fmt.Sprintf("%s: %s (HTTP %d, request %s)", e.Code, e.Message, e.Status, e.RequestID)
}

// client signs and sends requests to one endpoint.
type client struct {
	base string // scheme://host[:port], no trailing slash
	key  *mnsauth.Key
	hc   *http.Client
}

func newClient(endpoint string, key *mnsauth.Key, timeout time.Duration) *client {
	return &client{
		base: strings.TrimRight(endpoint, "/"),
		key:  key,
		// The long-poll wait is added per request.
		hc: &http.Client{Timeout: 0, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, ResponseHeaderTimeout: timeout + 31*time.Second}},
	}
}

// do sends one signed request; target is the path and query as signed.
// It returns the body of a 2xx answer; an error answer is an *APIError.
func (c *client) do(ctx context.Context, method, target string, headers map[string]string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+target, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "text/xml;charset=utf-8")
		req.Header.Set("Content-MD5", string(mnsauth.AppendContentMD5(nil, body)))
	}
	req.Header.Set("User-Agent", "smqctl")
	c.key.SignHTTP(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, b, apiError(resp, b)
	}
	return resp.StatusCode, b, nil
}

// apiError is the *APIError of an error answer with body b.
func apiError(resp *http.Response, b []byte) error {
	var e struct {
		Code, Message, RequestId string
	}
	if xml.Unmarshal(b, &e) != nil || e.Code == "" {
		return &APIError{Status: resp.StatusCode, Code: "HTTP" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(b)), RequestID: resp.Header.Get("x-mns-request-id")}
	}
	if e.RequestId == "" {
		e.RequestId = resp.Header.Get("x-mns-request-id")
	}
	return &APIError{Status: resp.StatusCode, Code: e.Code, Message: e.Message, RequestID: e.RequestId}
}

// Queue is a queue's attributes as GetQueueAttributes gives them.
type Queue struct {
	Name                   string `xml:"QueueName" json:"name"`
	CreateTime             int64  `xml:"CreateTime" json:"create_time"`
	LastModifyTime         int64  `xml:"LastModifyTime" json:"last_modify_time"`
	DelaySeconds           int    `xml:"DelaySeconds" json:"delay_seconds"`
	MaximumMessageSize     int    `xml:"MaximumMessageSize" json:"maximum_message_size"`
	MessageRetentionPeriod int    `xml:"MessageRetentionPeriod" json:"message_retention_period"`
	VisibilityTimeout      int    `xml:"VisibilityTimeout" json:"visibility_timeout"`
	PollingWaitSeconds     int    `xml:"PollingWaitSeconds" json:"polling_wait_seconds"`
	ActiveMessages         int64  `xml:"ActiveMessages" json:"active_messages"`
	InactiveMessages       int64  `xml:"InactiveMessages" json:"inactive_messages"`
	DelayMessages          int64  `xml:"DelayMessages" json:"delay_messages"`
	LoggingEnabled         bool   `xml:"LoggingEnabled" json:"logging_enabled"`
	// The dead-letter policy (smqd's flat extension elements), if set.
	DeadLetterTargetQueue string `xml:"DeadLetterTargetQueue" json:"dead_letter_queue,omitempty"`
	MaxReceiveCount       int    `xml:"MaxReceiveCount" json:"max_receive_count,omitempty"`
}

// Message is a received or peeked message.
type Message struct {
	MessageID        string `xml:"MessageId" json:"message_id"`
	ReceiptHandle    string `xml:"ReceiptHandle" json:"receipt_handle,omitempty"`
	MessageBody      string `xml:"MessageBody" json:"body"`
	MessageBodyMD5   string `xml:"MessageBodyMD5" json:"body_md5"`
	EnqueueTime      int64  `xml:"EnqueueTime" json:"enqueue_time"`
	NextVisibleTime  int64  `xml:"NextVisibleTime" json:"next_visible_time,omitempty"`
	FirstDequeueTime int64  `xml:"FirstDequeueTime" json:"first_dequeue_time,omitempty"`
	DequeueCount     int    `xml:"DequeueCount" json:"dequeue_count"`
	Priority         int    `xml:"Priority" json:"priority"`
	// The properties sent with the message, as the API writes them
	// (BINARY values in base64), and a dead-lettered message's DLQ ones.
	UserProperties   []Property `xml:"UserProperties>PropertyValue" json:"user_properties,omitempty"`
	SystemProperties []Property `xml:"SystemProperties>SystemPropertyValue" json:"system_properties,omitempty"`
}

// Property is one user or system property of a message.
type Property struct {
	Name  string `xml:"Name" json:"name"`
	Value string `xml:"Value" json:"value"`
	Type  string `xml:"Type" json:"type"`
}

// system returns the value of the system property name, "" if absent.
func (m *Message) system(name string) string {
	for _, p := range m.SystemProperties {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// queueAttrs are the attributes a create or set sends; nil fields are
// left out (create: the default; set: unchanged).
type queueAttrs struct {
	DelaySeconds, MaximumMessageSize, MessageRetentionPeriod, VisibilityTimeout, PollingWaitSeconds *int
	LoggingEnabled                                                                                  *bool
	DeadLetterTargetQueue                                                                           *string
	MaxReceiveCount                                                                                 *int
}

func (a *queueAttrs) xml() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Queue xmlns="` + xmlNS + `">`)
	put := func(name string, v *int) {
		if v != nil {
			fmt.Fprintf(&b, "<%s>%d</%s>", name, *v, name)
		}
	}
	put("DelaySeconds", a.DelaySeconds)
	put("MaximumMessageSize", a.MaximumMessageSize)
	put("MessageRetentionPeriod", a.MessageRetentionPeriod)
	put("VisibilityTimeout", a.VisibilityTimeout)
	put("PollingWaitSeconds", a.PollingWaitSeconds)
	if a.LoggingEnabled != nil {
		fmt.Fprintf(&b, "<LoggingEnabled>%t</LoggingEnabled>", *a.LoggingEnabled)
	}
	if a.DeadLetterTargetQueue != nil {
		b.WriteString("<DeadLetterTargetQueue>")
		xml.EscapeText(&b, []byte(*a.DeadLetterTargetQueue))
		b.WriteString("</DeadLetterTargetQueue>")
	}
	put("MaxReceiveCount", a.MaxReceiveCount)
	b.WriteString("</Queue>")
	return b.Bytes()
}

func queuePath(name string) string { return "/queues/" + url.PathEscape(name) }

// createQueue reports whether the queue was created (201) or existed with
// the same attributes (204).
func (c *client) createQueue(ctx context.Context, name string, a *queueAttrs) (bool, error) {
	st, _, err := c.do(ctx, "PUT", queuePath(name), nil, a.xml())
	return st == 201, err
}

func (c *client) setQueue(ctx context.Context, name string, a *queueAttrs) error {
	_, _, err := c.do(ctx, "PUT", queuePath(name)+"?metaoverride=true", nil, a.xml())
	return err
}

func (c *client) getQueue(ctx context.Context, name string) (*Queue, error) {
	_, b, err := c.do(ctx, "GET", queuePath(name), nil, nil)
	if err != nil {
		return nil, err
	}
	var q Queue
	if err := xml.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("GetQueueAttributes answer: %w", err)
	}
	return &q, nil
}

// purgeQueue deletes every message of the queue (smqd's PurgeQueue) and
// returns how many.
func (c *client) purgeQueue(ctx context.Context, name string) (int, error) {
	_, b, err := c.do(ctx, "DELETE", queuePath(name)+"/messages?purge=true", nil, nil)
	if err != nil {
		return 0, err
	}
	var p struct{ PurgedMessages int }
	if err := xml.Unmarshal(b, &p); err != nil {
		return 0, fmt.Errorf("PurgeQueue answer: %w", err)
	}
	return p.PurgedMessages, nil
}

func (c *client) deleteQueue(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, "DELETE", queuePath(name), nil, nil)
	return err
}

// listQueues returns every queue whose name starts with prefix, with its
// attributes, following NextMarker.
func (c *client) listQueues(ctx context.Context, prefix string) ([]Queue, error) {
	var out []Queue
	err := c.listPages(ctx, "/queues", prefix, func(b []byte) (string, error) {
		var page struct {
			Queues []struct {
				Queue
				URL string `xml:"QueueURL"`
			} `xml:"Queue"`
			NextMarker string
		}
		if err := xml.Unmarshal(b, &page); err != nil {
			return "", fmt.Errorf("ListQueue answer: %w", err)
		}
		for _, q := range page.Queues {
			if q.Name == "" {
				q.Name = lastSegment(q.URL)
			}
			out = append(out, q.Queue)
		}
		return page.NextMarker, nil
	})
	return out, err
}

// send sends one message, with its user and system properties; delay < 0
// leaves the queue's delay.
func (c *client) send(ctx context.Context, queue string, body []byte, priority, delay int, user, system []Property) (string, string, error) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Message xmlns="` + xmlNS + `"><MessageBody>`)
	if err := xml.EscapeText(&b, body); err != nil {
		return "", "", err
	}
	b.WriteString("</MessageBody>")
	if delay >= 0 {
		fmt.Fprintf(&b, "<DelaySeconds>%d</DelaySeconds>", delay)
	}
	if priority > 0 {
		fmt.Fprintf(&b, "<Priority>%d</Priority>", priority)
	}
	writeProps(&b, "UserProperties", "PropertyValue", user)
	writeProps(&b, "SystemProperties", "SystemPropertyValue", system)
	b.WriteString("</Message>")
	_, rb, err := c.do(ctx, "POST", queuePath(queue)+"/messages", nil, b.Bytes())
	if err != nil {
		return "", "", err
	}
	var m Message
	if err := xml.Unmarshal(rb, &m); err != nil {
		return "", "", fmt.Errorf("SendMessage answer: %w", err)
	}
	return m.MessageID, m.MessageBodyMD5, nil
}

// messages runs a batch receive or peek; an empty queue is no error.
func (c *client) messages(ctx context.Context, target string) ([]Message, error) {
	_, b, err := c.do(ctx, "GET", target, nil, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == "MessageNotExist" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var page struct {
		Messages []Message `xml:"Message"`
	}
	if err := xml.Unmarshal(b, &page); err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	return page.Messages, nil
}

// receive receives up to n messages, waiting up to wait; a negative wait
// is the queue's polling wait.
func (c *client) receive(ctx context.Context, queue string, n int, wait time.Duration) ([]Message, error) {
	t := fmt.Sprintf("%s/messages?numOfMessages=%d", queuePath(queue), n)
	if wait >= 0 {
		t += fmt.Sprintf("&waitseconds=%d", int(wait/time.Second))
	}
	return c.messages(ctx, t)
}

func (c *client) peek(ctx context.Context, queue string, n int) ([]Message, error) {
	return c.messages(ctx, fmt.Sprintf("%s/messages?peekonly=true&numOfMessages=%d", queuePath(queue), n))
}

func (c *client) deleteMessage(ctx context.Context, queue, handle string) error {
	_, _, err := c.do(ctx, "DELETE", queuePath(queue)+"/messages?ReceiptHandle="+url.QueryEscape(handle), nil, nil)
	return err
}

func (c *client) changeVisibility(ctx context.Context, queue, handle string, secs int) (string, int64, error) {
	_, b, err := c.do(ctx, "PUT", fmt.Sprintf("%s/messages?ReceiptHandle=%s&VisibilityTimeout=%d", queuePath(queue), url.QueryEscape(handle), secs), nil, nil)
	if err != nil {
		return "", 0, err
	}
	var v struct {
		ReceiptHandle   string
		NextVisibleTime int64
	}
	if err := xml.Unmarshal(b, &v); err != nil {
		return "", 0, fmt.Errorf("ChangeMessageVisibility answer: %w", err)
	}
	return v.ReceiptHandle, v.NextVisibleTime, nil
}

// metrics fetches url (unsigned) and returns its body, for stats.
func (c *client) metrics(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// sent is one entry of a batch send's answer: the stored message, or why
// it was not stored.
type sent struct {
	MessageID      string `xml:"MessageId"`
	MessageBodyMD5 string `xml:"MessageBodyMD5"`
	ErrorCode      string `xml:"ErrorCode"`
	ErrorMessage   string `xml:"ErrorMessage"`
}

// batchSend sends msgs (1..16) as new messages: each one's body,
// priority and properties, with delay seconds (< 0: the queue's). The answer has one
// entry per message, in order, also on a partial failure (spec §3.6);
// err is for the whole request.
func (c *client) batchSend(ctx context.Context, queue string, msgs []Message, delay int) ([]sent, error) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="` + xmlNS + `">`)
	for i := range msgs {
		m := &msgs[i]
		b.WriteString("<Message><MessageBody>")
		if err := xml.EscapeText(&b, []byte(m.MessageBody)); err != nil {
			return nil, err
		}
		b.WriteString("</MessageBody>")
		if delay >= 0 {
			fmt.Fprintf(&b, "<DelaySeconds>%d</DelaySeconds>", delay)
		}
		if m.Priority > 0 {
			fmt.Fprintf(&b, "<Priority>%d</Priority>", m.Priority)
		}
		writeProps(&b, "UserProperties", "PropertyValue", m.UserProperties)
		writeProps(&b, "SystemProperties", "SystemPropertyValue", m.SystemProperties)
		b.WriteString("</Message>")
	}
	b.WriteString("</Messages>")
	_, rb, err := c.do(ctx, "POST", queuePath(queue)+"/messages", nil, b.Bytes())
	var page struct {
		XMLName  xml.Name `xml:"Messages"` // not an <Error>, whose <Message> is text
		Messages []sent   `xml:"Message"`
	}
	if perr := xml.Unmarshal(rb, &page); perr == nil && len(page.Messages) == len(msgs) {
		return page.Messages, nil // stored, or a partial failure entry by entry
	}
	if err == nil {
		err = fmt.Errorf("BatchSendMessage answer: %d entries for %d messages", len(page.Messages), len(msgs))
	}
	return nil, err
}

func writeProps(b *bytes.Buffer, list, item string, ps []Property) {
	if len(ps) == 0 {
		return
	}
	b.WriteString("<" + list + ">")
	for _, p := range ps {
		b.WriteString("<" + item + "><Name>")
		xml.EscapeText(b, []byte(p.Name))
		b.WriteString("</Name><Value>")
		xml.EscapeText(b, []byte(p.Value))
		b.WriteString("</Value><Type>")
		xml.EscapeText(b, []byte(p.Type))
		b.WriteString("</Type></" + item + ">")
	}
	b.WriteString("</" + list + ">")
}

// batchDelete deletes the messages of handles (1..16). failed maps each
// handle the server did not delete to its error (spec §3.9); err is for
// the whole request.
func (c *client) batchDelete(ctx context.Context, queue string, handles []string) (failed map[string]*APIError, err error) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ReceiptHandles xmlns="` + xmlNS + `">`)
	for _, h := range handles {
		b.WriteString("<ReceiptHandle>")
		xml.EscapeText(&b, []byte(h))
		b.WriteString("</ReceiptHandle>")
	}
	b.WriteString("</ReceiptHandles>")
	st, rb, err := c.do(ctx, "DELETE", queuePath(queue)+"/messages", nil, b.Bytes())
	if err == nil {
		return nil, nil
	}
	var page struct {
		XMLName xml.Name `xml:"Errors"`
		Errors  []struct {
			ErrorCode, ErrorMessage, ReceiptHandle string
		} `xml:"Error"`
	}
	if xml.Unmarshal(rb, &page) != nil || len(page.Errors) == 0 {
		return nil, err
	}
	failed = make(map[string]*APIError, len(page.Errors))
	for _, e := range page.Errors {
		failed[e.ReceiptHandle] = &APIError{Status: st, Code: e.ErrorCode, Message: e.ErrorMessage}
	}
	return failed, nil
}
