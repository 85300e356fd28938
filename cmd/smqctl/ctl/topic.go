package ctl

// The topic verbs (topic spec §2.2-§2.5, §2.11): ls, create, get, set, rm
// and publish, with their requests. Subscriptions are in subscription.go.

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Topic is a topic's attributes as GetTopicAttributes gives them.
type Topic struct {
	Name                   string `xml:"TopicName" json:"name"`
	CreateTime             int64  `xml:"CreateTime" json:"create_time"`
	LastModifyTime         int64  `xml:"LastModifyTime" json:"last_modify_time"`
	MaximumMessageSize     int    `xml:"MaximumMessageSize" json:"maximum_message_size"`
	MessageRetentionPeriod int    `xml:"MessageRetentionPeriod" json:"message_retention_period"`
	MessageCount           int64  `xml:"MessageCount" json:"message_count"`
	LoggingEnabled         bool   `xml:"LoggingEnabled" json:"logging_enabled"`
}

// topicAttrs are the attributes a create or set sends; nil fields are
// left out (create: the default; set: unchanged).
type topicAttrs struct {
	MaximumMessageSize *int
	LoggingEnabled     *bool
}

func (a *topicAttrs) xml() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Topic xmlns="` + xmlNS + `">`)
	if a.MaximumMessageSize != nil {
		fmt.Fprintf(&b, "<MaximumMessageSize>%d</MaximumMessageSize>", *a.MaximumMessageSize)
	}
	if a.LoggingEnabled != nil {
		fmt.Fprintf(&b, "<LoggingEnabled>%t</LoggingEnabled>", *a.LoggingEnabled)
	}
	b.WriteString("</Topic>")
	return b.Bytes()
}

func topicPath(name string) string { return "/topics/" + url.PathEscape(name) }

// createTopic reports whether the topic was created (201) or existed with
// the same attributes (204).
func (c *client) createTopic(ctx context.Context, name string, a *topicAttrs) (bool, error) {
	st, _, err := c.do(ctx, "PUT", topicPath(name), nil, a.xml())
	return st == 201, err
}

func (c *client) setTopic(ctx context.Context, name string, a *topicAttrs) error {
	_, _, err := c.do(ctx, "PUT", topicPath(name)+"?metaoverride=true", nil, a.xml())
	return err
}

func (c *client) getTopic(ctx context.Context, name string) (*Topic, error) {
	_, b, err := c.do(ctx, "GET", topicPath(name), nil, nil)
	if err != nil {
		return nil, err
	}
	var t Topic
	if err := xml.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("GetTopicAttributes answer: %w", err)
	}
	return &t, nil
}

// deleteTopic deletes a topic; smqd answers 204 also when there is none
// (topic spec §2.4).
func (c *client) deleteTopic(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, "DELETE", topicPath(name), nil, nil)
	return err
}

// listPages runs a paged list request (ListQueue, ListTopic,
// ListSubscriptionByTopic) with meta, following NextMarker; page decodes
// one answer and returns its NextMarker.
func (c *client) listPages(ctx context.Context, target, prefix string, page func([]byte) (string, error)) error {
	marker := ""
	for {
		h := map[string]string{"x-mns-with-meta": "true", "x-mns-ret-number": "1000"}
		if prefix != "" {
			h["x-mns-prefix"] = prefix
		}
		if marker != "" {
			h["x-mns-marker"] = marker
		}
		_, b, err := c.do(ctx, "GET", target, h, nil)
		if err != nil {
			return err
		}
		next, err := page(b)
		if err != nil || next == "" {
			return err
		}
		marker = next
	}
}

// lastSegment is the name at the end of a resource URL.
func lastSegment(u string) string {
	s := u[strings.LastIndexByte(u, '/')+1:]
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

// listTopics returns every topic whose name starts with prefix, with its
// attributes.
func (c *client) listTopics(ctx context.Context, prefix string) ([]Topic, error) {
	var out []Topic
	err := c.listPages(ctx, "/topics", prefix, func(b []byte) (string, error) {
		var page struct {
			Topics []struct {
				Topic
				URL string `xml:"TopicURL"`
			} `xml:"Topic"`
			NextMarker string
		}
		if err := xml.Unmarshal(b, &page); err != nil {
			return "", fmt.Errorf("ListTopic answer: %w", err)
		}
		for _, t := range page.Topics {
			if t.Name == "" {
				t.Name = lastSegment(t.URL)
			}
			out = append(out, t.Topic)
		}
		return page.NextMarker, nil
	})
	return out, err
}

// publish publishes one message; tag "" sends no MessageTag.
func (c *client) publish(ctx context.Context, topic string, body []byte, tag string, user, system []Property) (string, string, error) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Message xmlns="` + xmlNS + `"><MessageBody>`)
	if err := xml.EscapeText(&b, body); err != nil {
		return "", "", err
	}
	b.WriteString("</MessageBody>")
	if tag != "" {
		b.WriteString("<MessageTag>")
		xml.EscapeText(&b, []byte(tag))
		b.WriteString("</MessageTag>")
	}
	writeProps(&b, "UserProperties", "PropertyValue", user)
	writeProps(&b, "SystemProperties", "SystemPropertyValue", system)
	b.WriteString("</Message>")
	_, rb, err := c.do(ctx, "POST", topicPath(topic)+"/messages", nil, b.Bytes())
	if err != nil {
		return "", "", err
	}
	var m Message
	if err := xml.Unmarshal(rb, &m); err != nil {
		return "", "", fmt.Errorf("PublishMessage answer: %w", err)
	}
	return m.MessageID, m.MessageBodyMD5, nil
}

// topicFlags registers the topic attributes as flags.
type topicFlags struct {
	maxSize intFlag
	logging boolFlag
}

func (a *topicFlags) register(fs *flag.FlagSet) {
	fs.Var(&a.maxSize, "max-message-size", "MaximumMessageSize in bytes, 1024..65536 (default 65536)")
	fs.Var(&a.logging, "logging", "LoggingEnabled (default false)")
}

func (a *topicFlags) attrs() *topicAttrs {
	return &topicAttrs{MaximumMessageSize: a.maxSize.v, LoggingEnabled: a.logging.v}
}

func (r *run) topicLs(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("topic ls [--prefix P] [--quiet]", flag.ContinueOnError)
	prefix := fs.String("prefix", "", "only topics whose name starts with this")
	quiet := fs.Bool("quiet", false, "print names only, one per line")
	if _, err := r.parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	ts, err := c.listTopics(rctx, *prefix)
	if err != nil {
		return err
	}
	switch {
	case r.g.json:
		if ts == nil {
			ts = []Topic{}
		}
		return r.printJSON(ts)
	case *quiet:
		for _, t := range ts {
			fmt.Fprintln(r.env.Stdout, t.Name)
		}
		return nil
	}
	rows := [][]string{{"TOPIC", "MESSAGES", "MAX MESSAGE SIZE", "LOGGING", "CREATED"}}
	for _, t := range ts {
		rows = append(rows, []string{t.Name, itoa(t.MessageCount), strconv.Itoa(t.MaximumMessageSize),
			strconv.FormatBool(t.LoggingEnabled), unixTime(t.CreateTime)})
	}
	r.table(rows)
	return nil
}

// unixTime formats epoch seconds.
func unixTime(s int64) string { return time.Unix(s, 0).UTC().Format(time.RFC3339) }

func (r *run) topicCreate(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("topic create NAME [flags]", flag.ContinueOnError)
	var a topicFlags
	a.register(fs)
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	created, err := c.createTopic(rctx, pos[0], a.attrs())
	if err != nil {
		return err
	}
	return r.printCreated(map[string]any{"name": pos[0], "created": created}, created, "topic "+pos[0])
}

func (r *run) topicGet(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("topic get NAME", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	t, err := c.getTopic(rctx, pos[0])
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(t)
	}
	r.table([][]string{
		{"Name", t.Name},
		{"MessageCount", itoa(t.MessageCount)},
		{"MaximumMessageSize", strconv.Itoa(t.MaximumMessageSize)},
		{"MessageRetentionPeriod", secs(t.MessageRetentionPeriod)},
		{"LoggingEnabled", strconv.FormatBool(t.LoggingEnabled)},
		{"CreateTime", unixTime(t.CreateTime)},
		{"LastModifyTime", unixTime(t.LastModifyTime)},
	})
	return nil
}

func (r *run) topicSet(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("topic set NAME [flags]", flag.ContinueOnError)
	var a topicFlags
	a.register(fs)
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *a.attrs() == (topicAttrs{}) {
		return usagef("topic set: give at least one attribute flag (see smqctl topic set -h)")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	if err := c.setTopic(rctx, pos[0], a.attrs()); err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"name": pos[0], "updated": true})
	}
	fmt.Fprintf(r.env.Stdout, "updated topic %s\n", pos[0])
	return nil
}

func (r *run) topicRm(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("topic rm NAME...", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 1, -1)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	// DeleteTopic answers 204 for a topic that is not there (topic spec
	// §2.4); asking first makes a typo exit 3, as queue rm does.
	var gone []string
	err = r.forEachName(ctx, pos, func(rctx context.Context, t string) error {
		_, err := c.getTopic(rctx, t)
		if err == nil {
			err = c.deleteTopic(rctx, t)
		}
		if err == nil {
			gone = append(gone, t)
			if !r.g.json {
				fmt.Fprintf(r.env.Stdout, "deleted topic %s and its subscriptions\n", t)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"deleted": gone})
	}
	return nil
}

// readBody reads a message body: the argument, --file, or stdin.
func (r *run) readBody(verb string, pos []string, file string) ([]byte, error) {
	var body []byte
	var err error
	switch {
	case len(pos) == 2 && file != "":
		return nil, usagef("%s: give the body as an argument or --file, not both", verb)
	case len(pos) == 2 && pos[1] != "-":
		body = []byte(pos[1])
	case file != "" && file != "-":
		if body, err = os.ReadFile(file); err != nil {
			return nil, usagef("%s: %v", verb, err)
		}
	default:
		if body, err = io.ReadAll(io.LimitReader(r.env.Stdin, 1<<20)); err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
	}
	if len(body) == 0 {
		return nil, usagef("%s: the message body is empty", verb)
	}
	if at, what := notXMLText(body); at >= 0 {
		// XML cannot carry it, and Go's encoder would send U+FFFD in its
		// place: the body stored would not be the one given.
		return nil, usagef("%s: the body has %s at byte %d, which the API's XML cannot carry; encode binary bodies (base64, as the SDKs do)", verb, what, at)
	}
	return body, nil
}

// notXMLText returns the offset of the first byte of body that XML 1.0
// text cannot hold (invalid UTF-8, a control character other than tab,
// newline and carriage return, U+FFFE or U+FFFF), and what it is; -1 if
// there is none.
func notXMLText(body []byte) (int, string) {
	for i := 0; i < len(body); {
		c, n := utf8.DecodeRune(body[i:])
		switch {
		case c == utf8.RuneError && n <= 1:
			return i, "invalid UTF-8"
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0xFFFE, c == 0xFFFF:
			return i, fmt.Sprintf("the character %U", c)
		}
		i += n
	}
	return -1, ""
}

func (r *run) topicPublish(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("topic publish TOPIC [BODY | --file F | < stdin] [flags]", flag.ContinueOnError)
	file := fs.String("file", "", "read the body from this file (- for stdin)")
	tag := fs.String("tag", "", "MessageTag: only subscriptions without a filter tag or with this one get the message (at most 16 characters)")
	var user, system propsFlag
	registerProps(fs, &user, &system)
	pos, err := r.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	body, err := r.readBody("topic publish", pos, *file)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	id, md5, err := c.publish(rctx, pos[0], body, *tag, user.ps, system.ps)
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]string{"message_id": id, "body_md5": md5})
	}
	r.table([][]string{{"MESSAGE ID", "BODY MD5"}, {id, md5}})
	return nil
}
