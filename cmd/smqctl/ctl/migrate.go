package ctl

// smqctl migrate --to ENDPOINT: a broker's queues, topics and
// subscriptions made again on another, and its messages moved there. It
// is how a single node becomes a cluster, or a cluster gets another shard
// count (fixed when it is created), with the public API only: any two
// smqd (or MNS) endpoints.
//
// Invariants:
//  1. Definitions first: every queue (with its attributes), then the
//     dead-letter policies (their targets exist by then), then topics and
//     subscriptions (a queue endpoint's queue exists by then). A name that
//     exists at the destination with other attributes is a conflict: it is
//     reported, left as it is, and its messages are not moved.
//  2. Messages move as a redrive does (redrive.go invariant 1): deleted at
//     the source only after the destination acknowledged the copy with the
//     same body MD5, so at least once, never lost. A copy keeps the body,
//     priority and every property, and is visible at once (DelaySeconds 0:
//     its delay, if any, was spent at the source).
//  3. Messages inactive or delayed at the source move once they are
//     visible, until every migrated queue is empty at the source or --wait
//     has passed; what is still there then is reported, per queue.
//  4. Re-running is safe: existing definitions with the same attributes
//     count as done, and only messages still at the source move.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/smqd/smqd/cmd/internal/credfile"
	"github.com/smqd/smqd/server/mnsauth"
)

// migration is what a migrate run did.
type migration struct {
	Queues        []string          `json:"queues"`        // made (or found the same) at the destination
	Topics        []string          `json:"topics"`        // the same
	Subscriptions []string          `json:"subscriptions"` // topic/name
	Conflicts     []string          `json:"conflicts"`     // what could not be made, and why
	Moved         map[string]int    `json:"moved"`         // messages per queue
	Left          map[string]string `json:"left"`          // queue → what is still at the source
	// Refused: messages the destination would not store (queue → message
	// id → why, the last time it was tried); they stay at the source.
	Refused map[string]map[string]string `json:"refused,omitempty"`
	// Copied: copies stored whose original the delete missed (its
	// visibility timeout ran out meanwhile): moved again later, twice.
	Copied map[string]int `json:"copied_not_deleted,omitempty"`
	// Resent: copies sent again after a send that got no definite answer, which
	// the destination may have stored: they may be twice there.
	Resent map[string]int `json:"resent_unanswered,omitempty"`
}

func (r *run) migrate(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("migrate --to ENDPOINT [flags]", flag.ContinueOnError)
	to := fs.String("to", "", "the destination smqd's address (required)")
	toID := fs.String("to-access-key-id", "", "the destination's access key id (default: the source's key)")
	toSecret := fs.String("to-access-key-secret", "", "the destination's access key secret")
	toCreds := fs.String("to-credentials-file", "", "the destination's credentials file (its first key)")
	prefix := fs.String("prefix", "", "only queues and topics whose names start with this")
	wait := new(time.Duration)
	durationVar(fs, wait, "wait", time.Minute, "how long to wait for messages still inactive or delayed at the source")
	defsOnly := fs.Bool("definitions-only", false, "make the queues, topics and subscriptions, move no message")
	rate := fs.Float64("rate", 0, "at most this many messages a second per queue (0: as fast as they go)")
	parallel := fs.Int("parallel", 4, "batches of a queue in flight at once, 1..16")
	if _, err := r.parse(fs, args, 0, 0); err != nil {
		return err
	}
	switch {
	case *to == "":
		return usagef("migrate: --to is required")
	case *wait < 0 || *rate < 0:
		return usagef("migrate: --wait and --rate must not be negative")
	case *parallel < 1 || *parallel > 16:
		return usagef("migrate: --parallel must be between 1 and 16")
	case (*toID == "") != (*toSecret == ""):
		return usagef("migrate: --to-access-key-id and --to-access-key-secret go together")
	}
	src, err := r.client()
	if err != nil {
		return err
	}
	key := src.key
	switch {
	case *toID != "":
		key = mnsauth.NewKey(*toID, *toSecret)
	case *toCreds != "":
		keys, err := credfile.Load(*toCreds)
		if err != nil {
			return usagef("--to-credentials-file: %v", err)
		}
		key = mnsauth.NewKey(keys[0].ID, keys[0].Secret)
	}
	ep := *to
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	dst := newClient(ep, key, r.g.timeout)
	if strings.TrimRight(ep, "/") == src.base {
		return usagef("migrate: --to is the source itself")
	}
	if same, err := sameBroker(ctx, r, src, dst); err != nil {
		fmt.Fprintf(r.env.Stderr, "smqctl: could not check that --to is another broker (%v); going on\n", err)
	} else if same {
		return usagef("migrate: --to %s is the source itself under another address (a queue made there shows at the source)", *to)
	}

	m := &migration{Moved: map[string]int{}, Left: map[string]string{}, Refused: map[string]map[string]string{}, Copied: map[string]int{}, Resent: map[string]int{}}
	queues, err := m.queues(ctx, r, src, dst, *prefix)
	if err != nil {
		return err
	}
	if err := m.topics(ctx, r, src, dst, *prefix); err != nil {
		return err
	}
	var runErr error
	if !*defsOnly {
		runErr = m.messages(ctx, r, src, dst, queues, *wait, *rate, *parallel)
	}
	if err := r.printMigration(m); err != nil { // what was done, also before an error
		return err
	}
	if runErr != nil {
		return runErr
	}
	if n := len(m.Conflicts) + len(m.Left); n > 0 {
		return fmt.Errorf("migration incomplete: %d conflict(s), %d queue(s) with messages left at the source", len(m.Conflicts), len(m.Left))
	}
	// A copy stored whose original stayed: the run (or a later one) moved
	// it again, a duplicate at the destination, which a script must see
	// (as a redrive's, redrive.go).
	if n := sumCounts(m.Copied); n > 0 {
		return fmt.Errorf("%d message(s) copied whose original's delete missed: they are twice at the destination, or will be once moved again", n)
	}
	if n := sumCounts(m.Resent); n > 0 {
		return fmt.Errorf("%d message(s) sent again after a send that got no definite answer: they may be twice at the destination", n)
	}
	return nil
}

// sameBroker reports whether src and dst are one broker (or one cluster)
// reached at two addresses: a queue of a random name made at dst shows at
// src. Compared by address only, localhost against 127.0.0.1 passed, and
// each round moved the messages back into their own queue, with new ids,
// until --wait ran out (console audit, 2026-12-06). The probe is deleted.
func sameBroker(ctx context.Context, r *run, src, dst *client) (bool, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, err
	}
	name := "smqctl-migrate-probe-" + hex.EncodeToString(b[:])
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	if _, err := dst.createQueue(rctx, name, &queueAttrs{}); err != nil {
		return false, err
	}
	defer func() {
		dctx, cancel := r.reqCtx(context.WithoutCancel(ctx), 0)
		defer cancel()
		if err := dst.deleteQueue(dctx, name); err != nil {
			fmt.Fprintf(r.env.Stderr, "smqctl: the probe queue %s could not be deleted at the destination: %v\n", name, err)
		}
	}()
	_, err := src.getQueue(rctx, name)
	var ae *APIError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ae) && ae.Code == "QueueNotExist":
		return false, nil
	}
	return false, err
}

// queues makes the source's queues at the destination, then their
// dead-letter policies, and returns the names whose messages may move.
func (m *migration) queues(ctx context.Context, r *run, src, dst *client, prefix string) ([]string, error) {
	rctx, cancel := r.reqCtx(ctx, time.Minute)
	list, err := src.listQueues(rctx, prefix)
	cancel()
	if err != nil {
		return nil, err
	}
	var made []string
	var policies []Queue
	for _, q := range list {
		rctx, cancel := r.reqCtx(ctx, 0)
		full, err := src.getQueue(rctx, q.Name)
		created := false
		if err == nil {
			created, err = dst.createQueue(rctx, q.Name, &queueAttrs{DelaySeconds: &full.DelaySeconds, MaximumMessageSize: &full.MaximumMessageSize,
				MessageRetentionPeriod: &full.MessageRetentionPeriod, VisibilityTimeout: &full.VisibilityTimeout,
				PollingWaitSeconds: &full.PollingWaitSeconds, LoggingEnabled: &full.LoggingEnabled})
		}
		cancel()
		var ae *APIError
		switch {
		case errors.As(err, &ae) && ae.Code == "QueueAlreadyExist", err == nil && !created:
			// It may differ only by a policy an earlier run set (invariant 4);
			// and a create without policy elements matches a queue with any
			// policy (server createQueue), so an existing one is checked too.
			if same, serr := m.sameQueue(ctx, r, dst, full); serr != nil || !same {
				m.Conflicts = append(m.Conflicts, fmt.Sprintf("queue %s: exists at the destination with other attributes", q.Name))
				continue
			}
		case errors.As(err, &ae) && ae.Code == "QueueNotExist":
			continue // deleted at the source meanwhile
		case err != nil:
			return nil, fmt.Errorf("queue %s: %w", q.Name, err)
		}
		made = append(made, q.Name)
		m.Queues = append(m.Queues, q.Name)
		if full.DeadLetterTargetQueue != "" {
			policies = append(policies, *full)
		}
	}
	for _, q := range policies {
		rctx, cancel := r.reqCtx(ctx, 0)
		err := dst.setQueue(rctx, q.Name, &queueAttrs{DeadLetterTargetQueue: &q.DeadLetterTargetQueue, MaxReceiveCount: &q.MaxReceiveCount})
		cancel()
		if err != nil {
			// Its messages stay at the source: at the destination, with no
			// policy, a message that fails for good would come back forever.
			m.Conflicts = append(m.Conflicts, fmt.Sprintf("queue %s: dead-letter policy (to %s): %v", q.Name, q.DeadLetterTargetQueue, err))
			made = slices.DeleteFunc(made, func(name string) bool { return name == q.Name })
		}
	}
	return made, nil
}

// sameQueue reports whether dst's queue has q's attributes, and either
// q's dead-letter policy or none (an earlier run made the queue and did
// not get to its policy, invariant 4): a policy of its own is the
// destination's, not to be replaced.
func (m *migration) sameQueue(ctx context.Context, r *run, dst *client, q *Queue) (bool, error) {
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	d, err := dst.getQueue(rctx, q.Name)
	if err != nil {
		return false, err
	}
	return d.DelaySeconds == q.DelaySeconds && d.MaximumMessageSize == q.MaximumMessageSize &&
		d.MessageRetentionPeriod == q.MessageRetentionPeriod && d.VisibilityTimeout == q.VisibilityTimeout &&
		d.PollingWaitSeconds == q.PollingWaitSeconds && d.LoggingEnabled == q.LoggingEnabled &&
		(d.DeadLetterTargetQueue == "" || d.DeadLetterTargetQueue == q.DeadLetterTargetQueue && d.MaxReceiveCount == q.MaxReceiveCount), nil
}

// topics makes the source's topics and their subscriptions at the
// destination.
func (m *migration) topics(ctx context.Context, r *run, src, dst *client, prefix string) error {
	rctx, cancel := r.reqCtx(ctx, time.Minute)
	list, err := src.listTopics(rctx, prefix)
	cancel()
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return nil // a source without the topic API (an older smqd)
	}
	if err != nil {
		return err
	}
	for _, t := range list {
		rctx, cancel := r.reqCtx(ctx, time.Minute)
		err := m.topic(rctx, src, dst, t)
		cancel()
		if err != nil {
			return fmt.Errorf("topic %s: %w", t.Name, err)
		}
	}
	return nil
}

func (m *migration) topic(ctx context.Context, src, dst *client, t Topic) error {
	full, err := src.getTopic(ctx, t.Name)
	if err != nil {
		return err
	}
	_, err = dst.createTopic(ctx, t.Name, &topicAttrs{MaximumMessageSize: &full.MaximumMessageSize, LoggingEnabled: &full.LoggingEnabled})
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == "TopicAlreadyExist" {
		m.Conflicts = append(m.Conflicts, fmt.Sprintf("topic %s: exists at the destination with other attributes", t.Name))
		return nil
	}
	if err != nil {
		return err
	}
	m.Topics = append(m.Topics, t.Name)
	subs, err := src.listSubscriptions(ctx, t.Name, "")
	if err != nil {
		return err
	}
	for _, s := range subs {
		full, err := src.getSubscription(ctx, t.Name, s.Name)
		if err != nil {
			return err
		}
		a := &subAttrs{Endpoint: &full.Endpoint, NotifyStrategy: &full.NotifyStrategy, NotifyContentFormat: &full.NotifyContentFormat}
		if full.FilterTag != "" {
			a.FilterTag = &full.FilterTag
		}
		if full.DeadLetterTargetQueue != "" {
			a.DeadLetterTargetQueue = &full.DeadLetterTargetQueue // its queue was made first
		}
		_, err = dst.subscribe(ctx, t.Name, s.Name, a)
		if errors.As(err, &ae) && ae.Status < 500 {
			m.Conflicts = append(m.Conflicts, fmt.Sprintf("subscription %s/%s: %s: %s", t.Name, s.Name, ae.Code, ae.Message))
			continue
		}
		if err != nil {
			return err
		}
		m.Subscriptions = append(m.Subscriptions, t.Name+"/"+s.Name)
	}
	return nil
}

// messages moves every queue's messages, in rounds over the queues, until
// a round finds none left at the source and moves none, or wait has
// passed since the first round.
func (m *migration) messages(ctx context.Context, r *run, src, dst *client, queues []string, wait time.Duration, rate float64, parallel int) error {
	deadline := time.Now().Add(wait)
	counts := func(q string) (*Queue, error) {
		rctx, cancel := r.reqCtx(ctx, 0)
		defer cancel()
		info, err := src.getQueue(rctx, q)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", q, err)
		}
		return info, nil
	}
	// Every round looks at every queue: a receive of this run can move a
	// message into a dead-letter queue the round found empty before (its
	// receive count reached), so a round ends the run only if it moved
	// nothing and found every queue empty.
	// A queue deleted at the source meanwhile is skipped, as in queues().
	gone := func(err error) bool {
		var ae *APIError
		return errors.As(err, &ae) && ae.Code == "QueueNotExist"
	}
	for first := true; ; first = false {
		var still []string
		moved := false
		for _, q := range slices.Clone(queues) {
			info, err := counts(q)
			if gone(err) {
				queues = slices.DeleteFunc(queues, func(n string) bool { return n == q })
				delete(m.Left, q)
				continue
			}
			if err != nil {
				return err
			}
			if info.ActiveMessages > 0 {
				moved = true
				res, err := moveAll(ctx, r, parallel, int(info.ActiveMessages), func(n int) *mover {
					mv := newMover(src, dst, q, rate/float64(n), func(*Message) (string, string) { return q, "" }, func(m Message) Message { return m })
					mv.delay = 0
					mv.visibility = time.Duration(info.VisibilityTimeout) * time.Second
					return mv
				})
				m.Moved[q] += res.Moved
				if res.Copied > 0 {
					m.Copied[q] += res.Copied
				}
				if res.Resent > 0 {
					m.Resent[q] += res.Resent
				}
				for _, l := range res.Left {
					if m.Refused[q] == nil {
						m.Refused[q] = map[string]string{}
					}
					m.Refused[q][l.MessageID] = l.Reason
				}
				if err != nil {
					err = fmt.Errorf("queue %s: %w", q, err)
				} else {
					info, err = counts(q)
				}
				if gone(err) {
					queues = slices.DeleteFunc(queues, func(n string) bool { return n == q })
					delete(m.Left, q)
					continue
				}
				if err != nil {
					return err
				}
			}
			if n := info.ActiveMessages + info.InactiveMessages + info.DelayMessages; n > 0 {
				still = append(still, q)
				m.Left[q] = fmt.Sprintf("%d active, %d inactive, %d delayed", info.ActiveMessages, info.InactiveMessages, info.DelayMessages)
			} else {
				delete(m.Left, q)
			}
		}
		if len(still) == 0 && !moved || !first && time.Now().After(deadline) {
			for q := range m.Refused {
				if _, ok := m.Left[q]; !ok {
					delete(m.Refused, q) // moved in a later round
				}
			}
			return nil
		}
		t := time.NewTimer(time.Second) // inactive and delayed ones come back with time
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (r *run) printMigration(m *migration) error {
	if r.g.json {
		for _, p := range []*[]string{&m.Queues, &m.Topics, &m.Subscriptions, &m.Conflicts} {
			if *p == nil {
				*p = []string{}
			}
		}
		return r.printJSON(m)
	}
	w := r.env.Stdout
	total := sumCounts(m.Moved)
	fmt.Fprintf(w, "queues: %d, topics: %d, subscriptions: %d; messages moved: %d\n", len(m.Queues), len(m.Topics), len(m.Subscriptions), total)
	for _, c := range m.Conflicts {
		fmt.Fprintf(w, "conflict: %s\n", c)
	}
	left := make([]string, 0, len(m.Left))
	for q := range m.Left {
		left = append(left, q)
	}
	sort.Strings(left)
	for _, q := range left {
		fmt.Fprintf(w, "left at the source: %s: %s\n", q, m.Left[q])
		ids := make([]string, 0, len(m.Refused[q]))
		for id := range m.Refused[q] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(w, "  message %s refused: %s\n", id, m.Refused[q][id])
		}
	}
	for _, q := range slices.Sorted(maps.Keys(m.Resent)) {
		fmt.Fprintf(w, "%s: %d message(s) sent again after a send that got no definite answer (a timeout, a dropped connection, a 503 \"may or may not have run\"): the destination may have stored the first send too, so they may be twice at the destination\n", q, m.Resent[q])
	}
	for _, q := range slices.Sorted(maps.Keys(m.Copied)) {
		fmt.Fprintf(w, "%s: %d message(s) copied whose original's delete missed (its receive expired first: the queue's visibility timeout): moved again by this run or the next, so twice at the destination\n", q, m.Copied[q])
	}
	return nil
}

// sumCounts adds up a per-queue count.
func sumCounts(c map[string]int) int {
	n := 0
	for _, k := range c {
		n += k
	}
	return n
}
