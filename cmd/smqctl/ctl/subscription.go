package ctl

// The subscription verbs (topic spec §2.6-§2.10, and the dead-letter
// extension of §3.8): ls, create, get, set and rm, with their requests.

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"fmt"
	"net/url"
	"strings"
)

// Subscription is a subscription's attributes as GetSubscriptionAttributes
// gives them.
type Subscription struct {
	Name                string `xml:"SubscriptionName" json:"name"`
	Topic               string `xml:"TopicName" json:"topic"`
	Endpoint            string `xml:"Endpoint" json:"endpoint"`
	NotifyStrategy      string `xml:"NotifyStrategy" json:"notify_strategy"`
	NotifyContentFormat string `xml:"NotifyContentFormat" json:"notify_content_format"`
	FilterTag           string `xml:"FilterTag" json:"filter_tag,omitempty"`
	// The dead-letter queue (smqd's flat extension element), if set.
	DeadLetterTargetQueue string `xml:"DeadLetterTargetQueue" json:"dead_letter_queue,omitempty"`
	CreateTime            int64  `xml:"CreateTime" json:"create_time"`
	LastModifyTime        int64  `xml:"LastModifyTime" json:"last_modify_time"`
}

// subAttrs are the elements a subscribe or set sends; nil fields are left
// out (subscribe: the default; set: unchanged).
type subAttrs struct {
	Endpoint, FilterTag, NotifyStrategy, NotifyContentFormat *string
	DeadLetterTargetQueue                                    *string // "" turns it off
}

func (a *subAttrs) xml() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Subscription xmlns="` + xmlNS + `">`)
	put := func(name string, v *string) {
		if v != nil {
			b.WriteString("<" + name + ">")
			xml.EscapeText(&b, []byte(*v))
			b.WriteString("</" + name + ">")
		}
	}
	put("Endpoint", a.Endpoint)
	put("FilterTag", a.FilterTag)
	put("NotifyStrategy", a.NotifyStrategy)
	put("NotifyContentFormat", a.NotifyContentFormat)
	put("DeadLetterTargetQueue", a.DeadLetterTargetQueue)
	b.WriteString("</Subscription>")
	return b.Bytes()
}

func subPath(topic, name string) string {
	return topicPath(topic) + "/subscriptions/" + url.PathEscape(name)
}

// subscribe reports whether the subscription was created (201) or existed
// with the same attributes (204).
func (c *client) subscribe(ctx context.Context, topic, name string, a *subAttrs) (bool, error) {
	st, _, err := c.do(ctx, "PUT", subPath(topic, name), nil, a.xml())
	return st == 201, err
}

func (c *client) setSubscription(ctx context.Context, topic, name string, a *subAttrs) error {
	_, _, err := c.do(ctx, "PUT", subPath(topic, name)+"?metaoverride=true", nil, a.xml())
	return err
}

func (c *client) getSubscription(ctx context.Context, topic, name string) (*Subscription, error) {
	_, b, err := c.do(ctx, "GET", subPath(topic, name), nil, nil)
	if err != nil {
		return nil, err
	}
	var s Subscription
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("GetSubscriptionAttributes answer: %w", err)
	}
	return &s, nil
}

// unsubscribe deletes a subscription; smqd answers 204 also when there is
// none (topic spec §2.9).
func (c *client) unsubscribe(ctx context.Context, topic, name string) error {
	_, _, err := c.do(ctx, "DELETE", subPath(topic, name), nil, nil)
	return err
}

// listSubscriptions returns every subscription of topic whose name starts
// with prefix, with its attributes.
func (c *client) listSubscriptions(ctx context.Context, topic, prefix string) ([]Subscription, error) {
	var out []Subscription
	err := c.listPages(ctx, topicPath(topic)+"/subscriptions", prefix, func(b []byte) (string, error) {
		var page struct {
			Subs []struct {
				Subscription
				URL string `xml:"SubscriptionURL"`
			} `xml:"Subscription"`
			NextMarker string
		}
		if err := xml.Unmarshal(b, &page); err != nil {
			return "", fmt.Errorf("ListSubscriptionByTopic answer: %w", err)
		}
		for _, s := range page.Subs {
			if s.Name == "" {
				s.Name = lastSegment(s.URL)
			}
			out = append(out, s.Subscription)
		}
		return page.NextMarker, nil
	})
	return out, err
}

// enumFlag is an optional choice among values, in any case; it holds the
// upper-case value.
type enumFlag struct {
	v      *string
	values []string
}

func (f *enumFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return *f.v
}

func (f *enumFlag) Set(s string) error {
	for _, v := range f.values {
		if strings.EqualFold(s, v) {
			f.v = &v
			return nil
		}
	}
	return fmt.Errorf("want %s, not %q", strings.Join(f.values, " or "), s)
}

// subFlags registers the subscription attributes as flags; create
// registers them all, set those SetSubscriptionAttributes changes.
type subFlags struct {
	filterTag, deadLetter stringFlag
	strategy, format      enumFlag
}

func (a *subFlags) register(fs *flag.FlagSet, create bool) {
	a.strategy.values = []string{"BACKOFF_RETRY", "EXPONENTIAL_DECAY_RETRY"}
	a.format.values = []string{"XML", "JSON", "SIMPLIFIED"}
	if create {
		fs.Var(&a.format, "format", "NotifyContentFormat: XML, JSON or SIMPLIFIED (the body alone) (default XML)")
	}
	fs.Var(&a.filterTag, "filter-tag", "FilterTag: only messages published with this tag (at most 16 characters; default every message)")
	fs.Var(&a.strategy, "strategy", "NotifyStrategy: BACKOFF_RETRY (3 retries, 10-20s apart) or EXPONENTIAL_DECAY_RETRY (176 retries over a day) (default BACKOFF_RETRY)")
	fs.Var(&a.deadLetter, "dead-letter-queue", "the queue that gets the notifications an HTTP endpoint did not take within its retries (an existing queue; \"\" turns it off; default: they are dropped)")
}

func (a *subFlags) attrs(endpoint *string) *subAttrs {
	return &subAttrs{Endpoint: endpoint, FilterTag: a.filterTag.v, NotifyStrategy: a.strategy.v,
		NotifyContentFormat: a.format.v, DeadLetterTargetQueue: a.deadLetter.v}
}

func (r *run) subLs(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("subscription ls TOPIC [--prefix P] [--quiet]", flag.ContinueOnError)
	prefix := fs.String("prefix", "", "only subscriptions whose name starts with this")
	quiet := fs.Bool("quiet", false, "print names only, one per line")
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
	ss, err := c.listSubscriptions(rctx, pos[0], *prefix)
	if err != nil {
		return err
	}
	switch {
	case r.g.json:
		if ss == nil {
			ss = []Subscription{}
		}
		return r.printJSON(ss)
	case *quiet:
		for _, s := range ss {
			fmt.Fprintln(r.env.Stdout, s.Name)
		}
		return nil
	}
	rows := [][]string{{"SUBSCRIPTION", "ENDPOINT", "FILTER TAG", "STRATEGY", "FORMAT", "DEAD-LETTER QUEUE"}}
	for _, s := range ss {
		rows = append(rows, []string{s.Name, s.Endpoint, dash(s.FilterTag), s.NotifyStrategy, s.NotifyContentFormat, dash(s.DeadLetterTargetQueue)})
	}
	r.table(rows)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *run) subCreate(ctx context.Context, name string, args []string) error {
	// ENDPOINT is an argument, not a flag: --endpoint is smqd's address.
	fs := flag.NewFlagSet("subscription create TOPIC NAME ENDPOINT", flag.ContinueOnError)
	var a subFlags
	a.register(fs, true)
	pos, err := r.parse(fs, args, 3, 3)
	if err != nil {
		return err
	}
	if pos[2] == "" {
		return usagef("subscription create: ENDPOINT is empty (http://host:port/path or acs:mns:{region}:{account}:queues/{queue})")
	}
	if a.filterTag.v != nil && *a.filterTag.v == "" {
		a.filterTag.v = nil // no tag: every message
	}
	if a.deadLetter.v != nil && *a.deadLetter.v == "" {
		a.deadLetter.v = nil
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	created, err := c.subscribe(rctx, pos[0], pos[1], a.attrs(&pos[2]))
	if err != nil {
		return err
	}
	return r.printCreated(map[string]any{"topic": pos[0], "name": pos[1], "created": created}, created,
		"subscription "+pos[1]+" of topic "+pos[0])
}

func (r *run) subGet(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("subscription get TOPIC NAME", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	s, err := c.getSubscription(rctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(s)
	}
	rows := [][]string{
		{"Name", s.Name},
		{"TopicName", s.Topic},
		{"Endpoint", s.Endpoint},
		{"NotifyStrategy", s.NotifyStrategy},
		{"NotifyContentFormat", s.NotifyContentFormat},
	}
	if s.FilterTag != "" {
		rows = append(rows, []string{"FilterTag", s.FilterTag})
	}
	if s.DeadLetterTargetQueue != "" {
		rows = append(rows, []string{"DeadLetterTargetQueue", s.DeadLetterTargetQueue})
	}
	rows = append(rows, []string{"CreateTime", unixTime(s.CreateTime)}, []string{"LastModifyTime", unixTime(s.LastModifyTime)})
	r.table(rows)
	return nil
}

func (r *run) subSet(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("subscription set TOPIC NAME [flags]", flag.ContinueOnError)
	var a subFlags
	a.register(fs, false)
	pos, err := r.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	if *a.attrs(nil) == (subAttrs{}) {
		return usagef("subscription set: give at least one of --strategy, --filter-tag, --dead-letter-queue (the endpoint and the format never change)")
	}
	if a.filterTag.v != nil && *a.filterTag.v == "" {
		// The API reads an empty FilterTag as absent (topic spec §2.6).
		return usagef("subscription set: --filter-tag cannot be removed; remove the subscription and create it again without one")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	if err := c.setSubscription(rctx, pos[0], pos[1], a.attrs(nil)); err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"topic": pos[0], "name": pos[1], "updated": true})
	}
	fmt.Fprintf(r.env.Stdout, "updated subscription %s of topic %s\n", pos[1], pos[0])
	return nil
}

func (r *run) subRm(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("subscription rm TOPIC NAME...", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 2, -1)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	// Unsubscribe answers 204 for a subscription that is not there (topic
	// spec §2.9); asking first makes a typo exit 3, as queue rm does.
	var gone []string
	err = r.forEachName(ctx, pos[1:], func(rctx context.Context, s string) error {
		_, err := c.getSubscription(rctx, pos[0], s)
		if err == nil {
			err = c.unsubscribe(rctx, pos[0], s)
		}
		if err == nil {
			gone = append(gone, s)
			if !r.g.json {
				fmt.Fprintf(r.env.Stdout, "deleted subscription %s of topic %s\n", s, pos[0])
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"topic": pos[0], "deleted": gone})
	}
	return nil
}
