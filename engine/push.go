package engine

// HTTP push delivery (spec mns-topic-api.md §3.3-§3.6): the pusher takes
// notifications from the push queues (push_queue.go) and POSTs them to
// their subscriptions' endpoints.
//
// Design: each HTTP subscription has up to PushOptions.Concurrency workers
// (one while idle; a worker that takes a full batch starts another, and
// one started so leaves when a poll finds nothing: push_pause.go grow). A
// worker receives up to pushBatch notifications from the subscription's
// push queue (waiting like a long poll when there is none), and for each
// takes a slot of its endpoint's semaphore, renews the notification's
// lease if what is left of it might not outlast the attempt (it may have
// waited long for its turn: the slots are shared by every subscription of
// the endpoint), pushes, and then:
//
//	endpoint answered 2xx          -> Delete, at once (not waiting for
//	                                  the fsync: a delete lost in a
//	                                  crash repeats a push): done
//	failed, a retry is left        -> ChangeVisibility(retry delay): the
//	                                  timing wheel makes it visible again
//	failed, no retry left, or one  -> moved to the subscription's
//	day after the publish             dead-letter queue (one log record),
//	                                  else deleted (discarded)
//
// The attempt number is the message's DequeueCount, which the log keeps,
// so a restart continues a schedule. Nothing waits per message: a waiting
// retry is a slot in a timing wheel, not a goroutine or a timer.
//
// Invariants:
//  1. A notification leaves its push queue only after a 2xx answer, or by
//     exhaustion (push_queue.go invariant 3). A crash at any point leaves
//     it in the queue, invisible for at most PushOptions.Lease, then pushed again:
//     at least once.
//  5. A push starts only while its notification's lease has at least
//     Timeout + leaseMargin left, so that no other worker takes it while
//     it is pushed and its delete or retry finds its handle valid; a
//     notification whose lease ended before its turn is left to whoever
//     received it since. So without a crash or a change of leader, each
//     notification is pushed until it is answered 2xx once, and then never.
//  2. No push goes to an address outside the allow list: the endpoint's
//     host is checked at Subscribe, and the address every connection is
//     dialled to is checked again (a name could resolve elsewhere later),
//     unless the operator allowed that host by name.
//  3. At most Concurrency pushes to one endpoint (scheme, host and port)
//     are in flight at once, across all subscriptions.
//  4. Header names are sent exactly as spec §0.8 spells them, and each
//     attempt is signed anew (spec §3.6) when a Signer is set.
//
// Owner: pusher.mu guards subs and sems; a pushSub's workers own their
// messages between receive and delete. Nothing is held across I/O:
// workers take no lock while pushing.

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// leaseMargin is what a notification's lease must have left, besides the
// push timeout, when its push starts (invariant 5).
const leaseMargin = time.Second

// pushBatch bounds the notifications a worker takes at once: it pushes
// them one after another (renewing the lease of one that waited too long
// for its turn: invariant 5).
func (p *pusher) pushBatch() int {
	return max(1, min(MaxBatch, int(p.opts.Lease/p.opts.Timeout)-2))
}

// PushOptions configure HTTP push delivery.
type PushOptions struct {
	// Allow lists where pushes may go: CIDR prefixes ("10.1.0.0/16",
	// "192.0.2.7/32") and host names ("hooks.example.com", allowed whatever
	// they resolve to). Empty means loopback only (127.0.0.0/8 and ::1),
	// so that a subscription cannot be used to probe an internal network.
	// "localhost" is allowed whenever 127.0.0.1 is.
	Allow []string
	// Concurrency is the number of pushes in flight to one endpoint
	// (scheme, host and port) at most, and the most workers an HTTP
	// subscription runs (one while idle, more while a backlog waits);
	// default 16.
	Concurrency int
	// MaxConns bounds the connections to endpoints the pusher holds open
	// at once, busy or idle (default DefaultPushMaxConns): they share the
	// process's open-file limit with clients, the log and the index. With
	// only a per-endpoint bound, 400 busy endpoints took every descriptor
	// the documented limit left: the index could not open a file and the
	// process ended (push audit, 2026-12-06). A push that finds none free
	// waits for one within its timeout.
	MaxConns int
	// Timeout bounds one push attempt; default 5 s (spec §3.3).
	Timeout time.Duration
	// Lease is how long a notification being pushed stays invisible to
	// the other workers: after a crash, the pushes that were in flight are
	// made again once it ends. Default 60 s; at least 2 x Timeout and
	// Timeout + 2 s.
	Lease time.Duration
	// Signer signs every push with RSA PKCS #1 v1.5 over SHA-1 (spec
	// §3.6); nil sends pushes unsigned (no Authorization header). At most
	// half the process's CPUs (GOMAXPROCS/2, at least one) sign at once,
	// so a Signer that waits (a remote key service) bounds the push rate
	// to that many signatures in flight. Broker.Close waits for a Sign in
	// progress: give a remote Signer its own timeout. Its key must be RSA
	// (receivers verify RSA signatures); CertURL without a Signer is
	// ignored.
	Signer crypto.Signer
	// CertURL is where receivers fetch the Signer's X.509 certificate; it
	// is sent base64-encoded in x-mns-signing-cert-url.
	CertURL string
	// InsecureSkipVerify accepts any certificate of an https endpoint
	// (tests only).
	InsecureSkipVerify bool
	// RelayDrain is how long Unsubscribe and DeleteTopic wait for the
	// deliveries of a queue subscription relayed to another broker (a
	// cluster's queue on another shard, topic_relay.go invariant 4) to
	// reach their queue before they discard what is left; default 5 s
	// (DefaultRelayDrain), negative: no wait.
	RelayDrain time.Duration
	// Disabled stops push delivery: notifications wait in their push
	// queues (for tools that open a data directory). PushStats then
	// counts no subscription and no backlog: the queues are not followed.
	Disabled bool
}

// PushStats count push delivery since start.
type PushStats struct {
	Subscriptions int   // HTTP subscriptions being pushed
	Backlog       int64 // notifications waiting or in flight, all HTTP push queues
	Delivered     int64 // pushes answered 2xx
	// Failed, DeadLettered and Discarded include the deliveries of queue
	// subscriptions relayed to another broker (a cluster's other shard,
	// topic_relay.go): a hop that failed, a delivery moved to the
	// subscription's dead-letter queue or dropped.
	Failed       int64 // attempts that failed (each retry counts)
	DeadLettered int64 // notifications moved to a dead-letter queue
	Discarded    int64 // notifications dropped with no retry left and no dead-letter queue, or waiting when their subscription or topic was deleted
	// Relays and RelayBacklog: the queue subscriptions relayed to another
	// broker, and the deliveries waiting in their push queues (not HTTP
	// pushes: a cluster counts their hops itself).
	Relays       int
	RelayBacklog int64
}

type pusher struct {
	b        *Broker
	opts     PushOptions
	prefixes []netip.Prefix
	hosts    map[string]bool

	// restricted dials only allowed addresses (invariant 2); byName is
	// for hosts the operator allowed by name.
	restricted, byName *http.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs map[uint64]*pushSub     // guarded by mu
	sems map[string]*endpointSem // guarded by mu: per endpoint (invariant 3)
	// following: a replica that does not lead its shard starts no worker
	// (topic_replica.go); gen counts its role changes. Guarded by mu.
	following bool
	gen       uint64

	// live counts the running workers (Settled waits for a yielding
	// leader's stopped ones: replica_role.go Yield).
	live                               atomic.Int32
	reqSeq                             atomic.Uint64
	delivered, failed, dead, discarded atomic.Int64
	onAttempt                          func() // tests: called after each attempt
}

// endpointSem is the semaphore of one endpoint (invariant 3) and the
// number of pushSubs holding it. The last one to end (its last worker
// returns, so none of its attempts holds a slot any more) drops it from
// pusher.sems: kept for every endpoint ever subscribed, the map grew with
// each new scheme, host and port for the life of the process (leak audit,
// 2026-12-06).
type endpointSem struct {
	ch   chan struct{}
	refs int // guarded by pusher.mu
}

// pushSub is one HTTP subscription being pushed.
type pushSub struct {
	p      *pusher
	q      *Queue
	sub    atomic.Pointer[subscription] // the latest value (SetSubscriptionAttributes)
	u      *pushURL
	client *http.Client
	sem    chan struct{}
	cancel context.CancelFunc
	slow   atomic.Int32 // slow failures since the last delivery (pauseAfterSlowFailure)
	// workers is the most workers ps runs, running those it runs (grow).
	workers int32
	running atomic.Int32
}

// initPush parses the options; Open calls it before loading anything.
func (p *pusher) init(b *Broker) error {
	p.b = b
	p.opts = b.opts.Push
	if p.opts.Concurrency <= 0 {
		p.opts.Concurrency = 16
	}
	if p.opts.Timeout <= 0 {
		p.opts.Timeout = 5 * time.Second
	}
	if p.opts.MaxConns <= 0 {
		p.opts.MaxConns = DefaultPushMaxConns
	}
	if p.opts.RelayDrain == 0 {
		p.opts.RelayDrain = DefaultRelayDrain
	}
	if p.opts.Lease <= 0 {
		p.opts.Lease = pushLease
	}
	// A fresh lease outlasts an attempt with its margin (invariant 5): a
	// lease under Timeout + leaseMargin was renewed before every push, and
	// one under 1 s could not be (ChangeVisibility's minimum), so nothing
	// was pushed again (review).
	p.opts.Lease = max(p.opts.Lease, 2*p.opts.Timeout, p.opts.Timeout+2*leaseMargin)
	allow := p.opts.Allow
	if len(allow) == 0 {
		allow = []string{"127.0.0.0/8", "::1/128"}
	}
	p.hosts = map[string]bool{}
	for _, a := range allow {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
		case strings.Contains(a, "/"):
			pf, err := netip.ParsePrefix(a)
			if err != nil {
				return fmt.Errorf("engine: push allow list: %q is not a CIDR prefix: %w", a, err)
			}
			p.prefixes = append(p.prefixes, pf.Masked())
		default:
			if ip, err := netip.ParseAddr(a); err == nil {
				p.prefixes = append(p.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			} else {
				p.hosts[strings.ToLower(a)] = true
			}
		}
	}
	tlsConf := &tls.Config{InsecureSkipVerify: p.opts.InsecureSkipVerify} //nolint:gosec // tests only, documented
	p.ctx, p.cancel = context.WithCancel(context.Background())
	conns := make(chan struct{}, p.opts.MaxConns) // one per open connection, both clients
	idle := max(1, p.opts.MaxConns/4)             // each client's: the rest stays free for new endpoints
	closeIdle := func() { p.restricted.CloseIdleConnections(); p.byName.CloseIdleConnections() }
	transport := func(control func(network, address string, c syscall.RawConn) error) *http.Client {
		d := &net.Dialer{Timeout: p.opts.Timeout, Control: control}
		return &http.Client{Transport: &http.Transport{
			DialContext:         boundedDial(d, conns, closeIdle, p.ctx.Done()),
			TLSClientConfig:     tlsConf,
			TLSHandshakeTimeout: p.opts.Timeout, // an unanswered one held its slot (review G)
			MaxIdleConns:        idle,
			MaxIdleConnsPerHost: min(p.opts.Concurrency, idle),
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	p.restricted = transport(func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !p.allowedIP(ap.Addr()) {
			return fmt.Errorf("push to %s refused: the address is not in the push allow list", address)
		}
		return nil
	})
	p.byName = transport(nil)
	p.subs = map[uint64]*pushSub{}
	p.sems = map[string]*endpointSem{}
	return nil
}

func (p *pusher) allowedIP(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, pf := range p.prefixes {
		if pf.Contains(ip) {
			return true
		}
	}
	return false
}

// allowed checks an HTTP endpoint against the allow list (invariant 2)
// without resolving names (no I/O under Broker.adminMu).
func (p *pusher) allowed(ep string) error {
	u, err := parsePushURL(ep)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.host, "[]")); err == nil {
		if !p.allowedIP(ip) {
			return fmt.Errorf("its address %s is not in the push allow list (smqd --push-allow)", ip)
		}
		return nil
	}
	if p.hosts[u.host] || u.host == "localhost" && p.allowedIP(netip.MustParseAddr("127.0.0.1")) {
		return nil
	}
	return fmt.Errorf("its host %s is not in the push allow list (smqd --push-allow)", u.host)
}

// startPush restores the push queues (push_queue.go invariant 2) and
// starts pushing every HTTP subscription; Open calls it last.
func (b *Broker) startPush() error {
	if err := b.pusher.init(b); err != nil {
		return err
	}
	if _, ok := b.store.(*replStore); ok {
		b.pusher.following = true // until it leads (topic_replica.go)
		return nil
	}
	subs, err := b.reconcilePush()
	if err != nil {
		b.log.Error("push queues could not all be restored; the subscriptions without one are not pushed until a restart", "err", err)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	for _, s := range subs {
		if q := b.internalQueue(pushQueueName(s.id)); q != nil {
			b.pusher.start(s, q)
		}
	}
	return nil
}

// start pushes subscription s from push queue q (adminMu held).
func (p *pusher) start(s *subscription, q *Queue) {
	if p.opts.Disabled {
		return
	}
	ps := &pushSub{p: p, q: q, client: p.restricted}
	workers := p.opts.Concurrency
	if s.relay {
		workers = relayWorkers // topic_relay.go
	} else {
		u, err := parsePushURL(s.cfg.Endpoint)
		if err != nil {
			p.b.log.Error("subscription endpoint is not a URL; not pushed", "topic", s.topic, "subscription", s.name, "err", err)
			return
		}
		ps.u = u
		if p.hosts[u.host] {
			ps.client = p.byName
		}
	}
	ctx, cancel := context.WithCancel(p.ctx)
	ps.cancel = cancel
	ps.sub.Store(s)
	p.mu.Lock()
	if p.following {
		// A replica that does not lead its shard: its leader pushes
		// (topic_replica.go).
		p.mu.Unlock()
		cancel()
		return
	}
	if old := p.subs[s.id]; old != nil {
		old.cancel()
	}
	p.subs[s.id] = ps
	if ps.u != nil {
		es := p.sems[ps.u.key]
		if es == nil {
			es = &endpointSem{ch: make(chan struct{}, p.opts.Concurrency)}
			p.sems[ps.u.key] = es
		}
		es.refs++
		ps.sem = es.ch
	}
	ps.workers = int32(workers)
	ps.running.Store(1)
	p.wg.Add(1)
	p.live.Add(1)
	p.mu.Unlock()
	go ps.work(ctx, true)
}

// releaseSem drops ps's hold on its endpoint's semaphore, and the
// semaphore with the last hold.
func (p *pusher) releaseSem(ps *pushSub) {
	if ps.u == nil || ps.sem == nil {
		return
	}
	p.mu.Lock()
	if es := p.sems[ps.u.key]; es != nil && es.ch == ps.sem {
		if es.refs--; es.refs <= 0 {
			delete(p.sems, ps.u.key)
		}
	}
	p.mu.Unlock()
}

// update installs a subscription's new value (its strategy, tag or
// dead-letter queue changed).
func (p *pusher) update(s *subscription) {
	p.mu.Lock()
	ps := p.subs[s.id]
	p.mu.Unlock()
	if ps != nil {
		ps.sub.Store(s)
	}
}

// remove stops pushing a subscription; its workers end on their own (one
// in an attempt finishes it first).
func (p *pusher) remove(id uint64) {
	p.mu.Lock()
	ps := p.subs[id]
	delete(p.subs, id)
	p.mu.Unlock()
	if ps != nil {
		ps.cancel()
	}
}

// stop ends every worker and waits for them (Broker.Close).
func (p *pusher) stop() {
	if p.cancel == nil {
		return
	}
	p.mu.Lock()
	p.following = true // no worker starts after this
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	// The workers are gone; their kept-alive connections (and each one's
	// reading and writing goroutines) stayed open until IdleConnTimeout,
	// 30 s after Close returned (embedding audit 2, 2026-12-06).
	p.restricted.CloseIdleConnections()
	p.byName.CloseIdleConnections()
}

func (p *pusher) stats() PushStats {
	p.mu.Lock()
	qs := make([]*Queue, 0, len(p.subs))
	relays := make([]bool, 0, len(p.subs))
	for _, ps := range p.subs {
		qs = append(qs, ps.q)
		relays = append(relays, ps.sub.Load().relay) // a queue subscription on another shard is no HTTP push
	}
	p.mu.Unlock()
	st := PushStats{Delivered: p.delivered.Load(), Failed: p.failed.Load(),
		DeadLettered: p.dead.Load(), Discarded: p.discarded.Load()}
	for k, q := range qs {
		a, i, d, _ := q.counts()
		if relays[k] {
			st.Relays++
			st.RelayBacklog += a + i + d
		} else {
			st.Subscriptions++
			st.Backlog += a + i + d
		}
	}
	return st
}

// PushStats returns the push delivery counters.
func (b *Broker) PushStats() PushStats { return b.pusher.stats() }

// work is one worker's loop: receive, push, settle. The first worker of a
// subscription (keeper) runs until ctx ends; the others leave when a poll
// finds nothing (grow).
func (ps *pushSub) work(ctx context.Context, keeper bool) {
	defer ps.p.wg.Done()
	defer ps.p.live.Add(-1)
	defer func() {
		// The last worker: grow starts none from zero, so ps is done.
		if ps.running.Add(-1) == 0 {
			ps.p.releaseSem(ps)
		}
	}()
	q, b := ps.q, ps.p.b
	batch := ps.p.pushBatch()
	dst := make([]Message, 0, batch)
	done := make([]ReceiptHandle, 0, batch)
	errs := make([]error, batch)
	for ctx.Err() == nil {
		var pause time.Duration
		untried := 0
		if ps.sub.Load().relay && b.movesHeld() {
			// Options.MovesHeld: take nothing meanwhile (taking would
			// lease the whole backlog again and again, each time a record).
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		var err error
		dst, err = q.pollInternal(ctx, batch, dst[:0], 30*time.Second)
		switch {
		case err == nil:
			if len(dst) == batch {
				ps.grow(ctx) // more may wait
			}
			done = done[:0]
			if ps.sub.Load().relay {
				done = ps.relay(ctx, dst, done) // topic_relay.go
			} else {
			tries:
				for i := range dst {
					if dst[i].Handle.IsZero() {
						continue // its lease lapsed while it waited (takeSlot)
					}
					switch ps.deliver(ctx, dst[i:]) {
					case pushDelivered:
						ps.deleteDelivered(&dst[i])
						ps.slow.Store(0)
					case pushSlowFailure:
						// The endpoint holds its slots for the timeout:
						// the rest goes back, and this worker pauses, so
						// that the endpoint's other subscriptions get the
						// slots (push audit, 2026-12-06).
						ps.giveBack(dst[i+1:])
						pause, untried = ps.pauseAfterSlowFailure(), len(dst)-i-1
						break tries
					case pushUntried:
						if ctx.Err() != nil {
							ps.giveBack(dst[i:]) // stopping: the rest was never tried
							break tries
						}
					}
				}
			}
			if len(done) > 0 {
				if _, err := q.delete(done, errs, false); err != nil {
					b.log.Debug("push queue delete failed; the notifications may be pushed again", "err", err)
				}
			}
			if ps.p.onAttempt != nil {
				for range len(dst) - untried {
					ps.p.onAttempt()
				}
			}
			if pause > 0 && !ps.sleep(ctx, pause) {
				return
			}
		case errors.Is(err, ErrMessageNotExist):
			if !keeper {
				return // nothing waits: the keeper is enough
			}
		case errors.Is(err, ErrQueueNotExist), errors.Is(err, ErrClosed), ctx.Err() != nil:
			return
		default:
			// The storage failed or is full: wait, then try again.
			b.log.Debug("push worker cannot receive", "queue", q.name, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// What deliver did with a notification.
type pushOutcome uint8

const (
	pushSettled     pushOutcome = iota // tried and failed (retry, dead letter, discard), or discarded unread
	pushDelivered                      // answered 2xx: the caller deletes it
	pushUntried                        // not tried: stopping, or its lease lapsed
	pushSlowFailure                    // tried and failed after half its timeout or more (settled as pushSettled)
)

// deliver makes one attempt at m, ms[0], and settles it (the table above),
// except that after a 2xx answer the caller deletes m. ms is the rest of
// the worker's batch, whose leases it renews while it waits for the
// endpoint's slot (push_lease.go).
func (ps *pushSub) deliver(ctx context.Context, ms []Message) pushOutcome {
	p, b := ps.p, ps.p.b
	m := &ms[0]
	sub := ps.sub.Load()
	if ctx.Err() != nil {
		return pushUntried
	}
	env, err := decodePushEnvelope(m.Body)
	if err != nil {
		b.log.Error("discarding a push queue message that is no notification", "topic", sub.topic, "subscription", sub.name, "err", err)
		ps.settleDelete(m)
		p.discarded.Add(1)
		return pushSettled
	}
	// The endpoint's slot (invariant 3), then the lease (invariant 5).
	if !ps.takeSlot(ctx, ms) {
		return pushUntried // stopping, or its lease lapsed: it reappears
	}
	// Built and signed before the lease is checked and the attempt's
	// timeout starts: the signature may wait for a CPU (signSlots).
	req, err := ps.request(ctx, sub, &env)
	if err != nil && ctx.Err() != nil {
		<-ps.sem
		return pushUntried
	}
	if !ps.leaseFor(m) {
		<-ps.sem
		return pushUntried
	}
	ok := false
	start := time.Now()
	if err != nil {
		p.b.log.Error("push request could not be built", "subscription", sub.name, "err", err)
	} else {
		ok = ps.push(ctx, sub, req)
	}
	<-ps.sem
	if ok {
		p.delivered.Add(1)
		return pushDelivered
	}
	ps.attemptFailed(ctx, m, &env, sub)
	if time.Since(start) >= p.opts.Timeout/2 && ctx.Err() == nil {
		return pushSlowFailure
	}
	return pushSettled
}

// attemptFailed settles a message whose delivery attempt failed: a retry
// after its strategy's delay, or, with none left, its dead-letter queue
// or the bin (the table at the top of the file).
func (ps *pushSub) attemptFailed(ctx context.Context, m *Message, env *pushEnvelope, sub *subscription) {
	p, q, b := ps.p, ps.q, ps.p.b
	p.failed.Add(1)
	if ctx.Err() != nil {
		return // stopping: the message reappears after its lease
	}
	now := b.nowMs()
	delay, more := retryDelay(sub.cfg.Strategy, m.DequeueCount, mrand.Float64)
	if sub.relay {
		delay, more = relayRetryDelay(m.DequeueCount), true // topic_relay.go
	}
	if more && now+delay.Milliseconds() < env.publishMs+pushMaxAge.Milliseconds() {
		if _, _, err := q.ChangeVisibility(m.Handle, delay); err != nil {
			b.log.Debug("push retry not scheduled; the message reappears after its lease", "subscription", sub.name, "err", err)
		}
		return
	}
	// No retry left (spec §3.3): dead-letter or discard.
	if dlq := sub.cfg.DeadLetterQueue; dlq != "" {
		if !b.beginMove() {
			return // Options.MovesHeld: tried again after its lease
		}
		defer b.endMove()
		if b.relayed(dlq) {
			switch err := ps.deadLetterElsewhere(m, env, sub, dlq); {
			case err == nil:
				p.dead.Add(1)
				return
			case !errors.Is(err, ErrQueueNotExist):
				b.log.Warn("notification not moved to its dead-letter queue on another shard yet; tried again after its lease", "subscription", sub.name, "queue", dlq, "err", err)
				return
			}
			// Gone: discarded, as with no dead-letter queue.
		} else if t, err := b.Queue(dlq); errors.Is(err, ErrClosed) {
			return // stopping: tried again after its lease
		} else if err == nil {
			moved, err := q.deadLetterHandle(m.Handle, t, sub)
			if err != nil || !moved {
				b.log.Warn("notification not moved to its dead-letter queue yet; tried again after its lease", "subscription", sub.name, "queue", dlq, "err", err)
				return
			}
			p.dead.Add(1)
			return
		}
	}
	b.log.Info("notification discarded: no retry left and no dead-letter queue", "topic", sub.topic, "subscription", sub.name,
		"message_id", env.id.String(), "attempts", m.DequeueCount)
	ps.settleDelete(m)
	p.discarded.Add(1)
}

func (ps *pushSub) settleDelete(m *Message) {
	var errs [1]error
	if _, err := ps.q.delete([]ReceiptHandle{m.Handle}, errs[:], false); err != nil || errs[0] != nil {
		ps.p.b.log.Debug("push queue delete failed; the notification may be pushed again", "err", errors.Join(err, errs[0]))
	}
}

// push makes one attempt with req (the caller holds the endpoint's
// slot): true if the endpoint answered 2xx within PushOptions.Timeout.
func (ps *pushSub) push(ctx context.Context, sub *subscription, req *http.Request) bool {
	p := ps.p
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	resp, err := ps.client.Do(req.WithContext(ctx))
	if err != nil {
		p.b.log.Debug("push failed", "subscription", sub.name, "endpoint", ps.u.url, "err", err)
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		p.b.log.Debug("push refused", "subscription", sub.name, "endpoint", ps.u.url, "status", resp.StatusCode)
		return false
	}
	return true
}
