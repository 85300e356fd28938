package ctl

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// secondsFlag is an optional duration in whole seconds: "60", "60s",
// "1m30s", "4h", and whole days before the rest ("4d", "1d12h"), as the
// queue attributes' ranges are said (7d). Unset leaves the attribute out.
type secondsFlag struct{ v *int }

func (f *secondsFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f *secondsFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil || d%time.Second != 0 {
		return fmt.Errorf("want whole seconds (60), a duration (1m30s) or whole days (4d, 1d12h), not %q", s)
	}
	n := int(d / time.Second)
	f.v = &n
	return nil
}

// parseDuration reads a duration as the docs say smqctl takes them: whole
// seconds ("60"), a Go duration ("1m30s", "1.5s"), or whole days before
// the rest ("4d", "1d12h"). Negative ones are refused (a --delay of -5
// once sent the message with the queue's delay, exit 0: console audit,
// 2026-12-06).
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("want whole seconds (60), a duration (1m30s) or whole days (4d, 1d12h), not %q", s)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 3650*86400 {
			return 0, bad
		}
		return time.Duration(n) * time.Second, nil
	}
	var days int
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > 3650 {
			return 0, bad
		}
		days, rest = n, s[i+1:]
	}
	var d time.Duration
	if rest != "" || days == 0 {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return 0, bad
		}
	}
	return time.Duration(days)*24*time.Hour + d, nil
}

// durationFlag is a duration flag that takes what parseDuration takes
// (flag.Duration refused "20" with "parse error", against the docs).
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// durationVar defines a durationFlag on fs.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

// propsFlag collects message properties: NAME=VALUE (a STRING) or
// NAME:TYPE=VALUE with TYPE STRING, NUMBER, BOOLEAN or BINARY (its value
// base64, as on the wire), once per flag.
type propsFlag struct{ ps []Property }

func (f *propsFlag) String() string { return "" }

func (f *propsFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE or NAME:TYPE=VALUE, not %q", s)
	}
	typ := "STRING"
	if n, t, ok := strings.Cut(name, ":"); ok {
		name, typ = n, strings.ToUpper(t)
		switch typ {
		case "STRING", "NUMBER", "BOOLEAN", "BINARY":
		default:
			return fmt.Errorf("type %q: want STRING, NUMBER, BOOLEAN or BINARY", t)
		}
	}
	// The server stores a BINARY value as the text it is given: one that
	// is not base64 reached receivers that decode it (console audit,
	// 2026-12-07).
	if _, err := base64.StdEncoding.DecodeString(value); typ == "BINARY" && err != nil {
		return fmt.Errorf("%s is a BINARY, whose value is base64, not %q", name, value)
	}
	f.ps = append(f.ps, Property{Name: name, Value: value, Type: typ})
	return nil
}

// registerProps adds the property flags of a send or a publish.
func registerProps(fs *flag.FlagSet, user, system *propsFlag) {
	fs.Var(user, "property", "a user property NAME=VALUE, or NAME:TYPE=VALUE (TYPE STRING, NUMBER, BOOLEAN or BINARY, base64); repeat for more")
	fs.Var(system, "system-property", "a system property NAME=VALUE (traceparent, tracestate, baggage); repeat for more")
}

// intFlag is an optional integer.
type intFlag struct{ v *int }

func (f *intFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f *intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want an integer, not %q", s)
	}
	f.v = &n
	return nil
}

// boolFlag is an optional boolean.
type boolFlag struct{ v *bool }

func (f *boolFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.FormatBool(*f.v)
}

func (f *boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, not %q", s)
	}
	f.v = &b
	return nil
}

func (f *boolFlag) IsBoolFlag() bool { return true }

// stringFlag is a string flag that knows whether it was given.
type stringFlag struct{ v *string }

func (f *stringFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return *f.v
}

func (f *stringFlag) Set(s string) error {
	f.v = &s
	return nil
}

// attrFlags registers every queue attribute as a flag.
type attrFlags struct {
	delay, retention, visibility, pollWait secondsFlag
	maxSize, maxReceives                   intFlag
	logging                                boolFlag
	deadLetter                             stringFlag
}

func (a *attrFlags) register(fs *flag.FlagSet) {
	fs.Var(&a.visibility, "visibility-timeout", "VisibilityTimeout: how long a received message stays invisible, 1s..12h (default 30s)")
	fs.Var(&a.delay, "delay", "DelaySeconds: delay of every new message, 0..7d (default 0)")
	fs.Var(&a.pollWait, "polling-wait", "PollingWaitSeconds: a receive's default long-poll wait, 0..30s (default 0)")
	fs.Var(&a.retention, "retention", "MessageRetentionPeriod: how long a message lives after its send, 60s..7d (default 4d = 345600); a change applies to later sends only")
	fs.Var(&a.maxSize, "max-message-size", "MaximumMessageSize in bytes, 1024..65536 (default 65536)")
	fs.Var(&a.logging, "logging", "LoggingEnabled (default false)")
	fs.Var(&a.deadLetter, "dead-letter-queue", "dead-letter policy: the queue a message received --max-receive-count times moves to (an existing queue; \"\" turns the policy off)")
	fs.Var(&a.maxReceives, "max-receive-count", "dead-letter policy: receives before a message moves, 1..1000")
}

func (a *attrFlags) attrs() *queueAttrs {
	return &queueAttrs{
		DelaySeconds: a.delay.v, MaximumMessageSize: a.maxSize.v, MessageRetentionPeriod: a.retention.v,
		VisibilityTimeout: a.visibility.v, PollingWaitSeconds: a.pollWait.v, LoggingEnabled: a.logging.v,
		DeadLetterTargetQueue: a.deadLetter.v, MaxReceiveCount: a.maxReceives.v,
	}
}

func (a *attrFlags) empty() bool {
	return *a.attrs() == queueAttrs{}
}

func (r *run) queueLs(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue ls [--prefix P] [--quiet]", flag.ContinueOnError)
	prefix := fs.String("prefix", "", "only queues whose name starts with this")
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
	qs, err := c.listQueues(rctx, *prefix)
	if err != nil {
		return err
	}
	switch {
	case r.g.json:
		if qs == nil {
			qs = []Queue{}
		}
		return r.printJSON(qs)
	case *quiet:
		for _, q := range qs {
			fmt.Fprintln(r.env.Stdout, q.Name)
		}
		return nil
	}
	rows := [][]string{{"QUEUE", "ACTIVE", "INACTIVE", "DELAYED", "VISIBILITY", "DELAY", "RETENTION"}}
	for _, q := range qs {
		rows = append(rows, []string{q.Name, itoa(q.ActiveMessages), itoa(q.InactiveMessages), itoa(q.DelayMessages),
			secs(q.VisibilityTimeout), secs(q.DelaySeconds), secs(q.MessageRetentionPeriod)})
	}
	r.table(rows)
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func secs(n int) string { return (time.Duration(n) * time.Second).String() }

func (r *run) queueCreate(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue create NAME [flags]", flag.ContinueOnError)
	var a attrFlags
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
	created, err := c.createQueue(rctx, pos[0], a.attrs())
	if err != nil {
		return err
	}
	return r.printCreated(map[string]any{"name": pos[0], "created": created}, created, "queue "+pos[0])
}

// printCreated reports a create: js as JSON, else "created WHAT" or "WHAT
// exists with these attributes" (an identical one existed).
func (r *run) printCreated(js map[string]any, created bool, what string) error {
	switch {
	case r.g.json:
		return r.printJSON(js)
	case created:
		fmt.Fprintf(r.env.Stdout, "created %s\n", what)
	default:
		fmt.Fprintf(r.env.Stdout, "%s exists with these attributes\n", what)
	}
	return nil
}

func (r *run) queueGet(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue get NAME", flag.ContinueOnError)
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
	q, err := c.getQueue(rctx, pos[0])
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(q)
	}
	rows := [][]string{
		{"Name", q.Name},
		{"ActiveMessages", itoa(q.ActiveMessages)},
		{"InactiveMessages", itoa(q.InactiveMessages)},
		{"DelayMessages", itoa(q.DelayMessages)},
		{"VisibilityTimeout", secs(q.VisibilityTimeout)},
		{"DelaySeconds", secs(q.DelaySeconds)},
		{"PollingWaitSeconds", secs(q.PollingWaitSeconds)},
		{"MessageRetentionPeriod", secs(q.MessageRetentionPeriod)},
		{"MaximumMessageSize", strconv.Itoa(q.MaximumMessageSize)},
		{"LoggingEnabled", strconv.FormatBool(q.LoggingEnabled)},
		{"CreateTime", time.Unix(q.CreateTime, 0).UTC().Format(time.RFC3339)},
		{"LastModifyTime", time.Unix(q.LastModifyTime, 0).UTC().Format(time.RFC3339)},
	}
	if q.DeadLetterTargetQueue != "" {
		rows = append(rows, []string{"DeadLetterTargetQueue", q.DeadLetterTargetQueue}, []string{"MaxReceiveCount", strconv.Itoa(q.MaxReceiveCount)})
	}
	r.table(rows)
	return nil
}

func (r *run) queueSet(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue set NAME [flags]", flag.ContinueOnError)
	var a attrFlags
	a.register(fs)
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if a.empty() {
		return usagef("queue set: give at least one attribute flag (see smqctl queue set -h)")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	if err := c.setQueue(rctx, pos[0], a.attrs()); err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"name": pos[0], "updated": true})
	}
	fmt.Fprintf(r.env.Stdout, "updated queue %s\n", pos[0])
	return nil
}

// forEachName runs op on each of names in turn, each with its own request
// deadline (--timeout), and stops at the first error.
func (r *run) forEachName(ctx context.Context, names []string, op func(ctx context.Context, name string) error) error {
	for _, n := range names {
		rctx, cancel := r.reqCtx(ctx, 0)
		err := op(rctx, n)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// queuePurge deletes every message of each queue named (smqd's
// PurgeQueue); the queues stay.
func (r *run) queuePurge(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue purge NAME...", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 1, -1)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	purged := map[string]int{}
	err = r.forEachName(ctx, pos, func(rctx context.Context, q string) error {
		n, err := c.purgeQueue(rctx, q)
		if err == nil {
			purged[q] = n
			if !r.g.json {
				fmt.Fprintf(r.env.Stdout, "purged %d message(s) from %s\n", n, q)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"purged": purged})
	}
	return nil
}

func (r *run) queueRm(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue rm NAME...", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 1, -1)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	// smqd answers 404 QueueNotExist for a queue that is not there (spec
	// §5): a typo exits 3.
	var gone []string
	err = r.forEachName(ctx, pos, func(rctx context.Context, q string) error {
		err := c.deleteQueue(rctx, q)
		if err == nil {
			gone = append(gone, q)
			if !r.g.json {
				fmt.Fprintf(r.env.Stdout, "deleted queue %s\n", q)
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
