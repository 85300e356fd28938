package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
)

func (r *run) msgSend(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("send QUEUE [BODY | --file F | < stdin] [flags]", flag.ContinueOnError)
	file := fs.String("file", "", "read the body from this file (- for stdin)")
	priority := fs.Int("priority", 0, "priority, 1 (highest) to 16 (default: 8)")
	var delay secondsFlag
	fs.Var(&delay, "delay", "delay before the message becomes visible, 0..7d (default: the queue's)")
	var user, system propsFlag
	registerProps(fs, &user, &system)
	pos, err := r.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	if *priority != 0 && (*priority < 1 || *priority > 16) {
		return usagef("send: --priority must be between 1 and 16")
	}
	body, err := r.readBody("send", pos, *file)
	if err != nil {
		return err
	}
	d := -1
	if delay.v != nil {
		d = *delay.v
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	id, md5, err := c.send(rctx, pos[0], body, *priority, d, user.ps, system.ps)
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]string{"message_id": id, "body_md5": md5})
	}
	fmt.Fprintln(r.env.Stdout, id)
	return nil
}

// messageFlags are the flags receive and peek share.
type messageFlags struct {
	count int
	raw   bool
}

func (m *messageFlags) register(fs *flag.FlagSet, verb string) {
	fs.IntVar(&m.count, "count", 1, "messages to "+verb+", 1..16")
	fs.BoolVar(&m.raw, "raw", false, "print the bodies only, one per line")
}

func (r *run) printMessages(msgs []Message, raw bool, received bool) error {
	switch {
	case r.g.json:
		if msgs == nil {
			msgs = []Message{}
		}
		return r.printJSON(msgs)
	case raw:
		for _, m := range msgs {
			fmt.Fprintln(r.env.Stdout, m.MessageBody)
		}
		return nil
	case len(msgs) == 0:
		fmt.Fprintln(r.env.Stderr, "no message")
		return nil
	}
	head := []string{"MESSAGE ID", "PRIORITY", "RECEIVES", "ENQUEUED", "BODY"}
	if received {
		head = []string{"MESSAGE ID", "RECEIPT HANDLE", "PRIORITY", "RECEIVES", "VISIBLE AGAIN", "BODY"}
	}
	rows := [][]string{head}
	for _, m := range msgs {
		if received {
			rows = append(rows, []string{m.MessageID, m.ReceiptHandle, strconv.Itoa(m.Priority), strconv.Itoa(m.DequeueCount), msTime(m.NextVisibleTime), oneLine(m.MessageBody, 60)})
		} else {
			rows = append(rows, []string{m.MessageID, strconv.Itoa(m.Priority), strconv.Itoa(m.DequeueCount), msTime(m.EnqueueTime), oneLine(m.MessageBody, 60)})
		}
	}
	r.table(rows)
	return nil
}

func (r *run) msgReceive(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("receive QUEUE [flags]", flag.ContinueOnError)
	var m messageFlags
	m.register(fs, "receive")
	wait := new(time.Duration)
	durationVar(fs, wait, "wait", 0, "wait up to this long for a message, 0..30s (0: the queue's polling wait)")
	del := fs.Bool("delete", false, "delete the messages once printed")
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if m.count < 1 || m.count > 16 {
		return usagef("receive: --count must be between 1 and 16")
	}
	if *wait < 0 || *wait > 30*time.Second || *wait%time.Second != 0 {
		return usagef("receive: --wait must be whole seconds between 0 and 30s")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, *wait+30*time.Second) // the queue's own wait is at most 30 s
	defer cancel()
	w := *wait
	if w == 0 {
		w = -1 // the queue's polling wait
	}
	msgs, err := c.receive(rctx, pos[0], m.count, w)
	if err != nil {
		return err
	}
	if err := r.printMessages(msgs, m.raw, true); err != nil {
		return err
	}
	if *del {
		var errs []error
		for _, msg := range msgs {
			errs = append(errs, c.deleteMessage(rctx, pos[0], msg.ReceiptHandle))
		}
		return errors.Join(errs...)
	}
	return nil
}

func (r *run) msgPeek(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("peek QUEUE [flags]", flag.ContinueOnError)
	var m messageFlags
	m.register(fs, "peek")
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if m.count < 1 || m.count > 16 {
		return usagef("peek: --count must be between 1 and 16")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	msgs, err := c.peek(rctx, pos[0], m.count)
	if err != nil {
		return err
	}
	return r.printMessages(msgs, m.raw, false)
}

func (r *run) msgDelete(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("message delete QUEUE HANDLE...", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 2, 17)
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	var done []string
	for _, h := range pos[1:] {
		if err := c.deleteMessage(rctx, pos[0], h); err != nil {
			return err
		}
		done = append(done, h)
	}
	if r.g.json {
		return r.printJSON(map[string]any{"deleted": done})
	}
	fmt.Fprintf(r.env.Stdout, "deleted %d message(s)\n", len(done))
	return nil
}

func (r *run) msgVisibility(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("message visibility QUEUE HANDLE TIMEOUT", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 3, 3)
	if err != nil {
		return err
	}
	var t secondsFlag
	if err := t.Set(pos[2]); err != nil {
		return usagef("message visibility: TIMEOUT: %v", err)
	}
	if *t.v < 1 || *t.v > 43200 {
		return usagef("message visibility: TIMEOUT must be between 1s and 12h")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	h, next, err := c.changeVisibility(rctx, pos[0], pos[1], *t.v)
	if err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"receipt_handle": h, "next_visible_time": next})
	}
	r.table([][]string{{"RECEIPT HANDLE", "VISIBLE AGAIN"}, {h, msTime(next)}})
	return nil
}
