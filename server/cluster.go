package server

// The server of a cluster node (NewCluster): every queue operation goes to
// its shard's leader.
//
// Routing. After a request is authenticated and its queue name decoded,
// routeCluster asks the node where the queue's shard is led:
//   - here: the request runs on this node's broker of the shard;
//   - elsewhere: the request (headers and body as the client sent them, the
//     signature included) is forwarded to the leader over the cluster's
//     authenticated transport (engine/cluster/forward.go), which runs it
//     through this same path — the signature is checked again there — and
//     its answer is passed back unchanged;
//   - nowhere (an election is running): the request waits up to
//     Options.ClusterLeaderWait for a leader, then gets 503
//     ServiceUnavailable, which every SDK treats as retryable.
//
// A forwarded request is never forwarded again: a node that receives one
// for a shard it does not lead (leadership moved meanwhile) answers at
// once that it did not run it (hdrNotRun) when it knows the new leader,
// and the forwarding node routes it again within its wait; with no leader
// known it waits like any request and then answers 503, unless it is
// shutting down: then it answers not-run at once, as it does for an
// operation its yielding broker refused (its leads were just handed over,
// and the forwarding node, which is not stopping, waits for the next
// leader). A request whose
// forwarding failed before it left this node (no connection to the
// leader) is routed again within the wait; one that may have run on the
// leader (the connection broke while waiting for the answer) is answered
// 503 without a retry, since a retried receive or send would run twice.
// An operation the leader refused before it changed anything
// (engine.ErrRetryOnLeader: it is handing its lead over) is routed and
// run again too (serveClusterQueue). A client's own request does all this
// while its node shuts down as well: the node hands its leads over first
// (smqd on SIGTERM), and a request that meets the hand-over waits for the
// next leader and is forwarded there (the shutdown waits for it), instead
// of being answered 503.
//
// Reads that span shards (ListQueue) are served from this node's replicas
// of every shard: what they show may trail the leaders by the replication
// lag (docs/operations.md).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
	"github.com/valyala/fasthttp"
)

// NewCluster returns a Server for a cluster node: any node's API serves
// every queue. The node is owned by the caller, who closes it after
// Shutdown returns.
func NewCluster(c *cluster.Node, opts Options) (*Server, error) {
	if c == nil {
		return nil, errors.New("server: nil cluster node")
	}
	s, err := newServer(nil, c, opts)
	if err != nil {
		return nil, err
	}
	s.fwdIn.New = func() any {
		f := &fwdIn{br: bufio.NewReaderSize(nil, 16<<10), bw: bufio.NewWriterSize(nil, 16<<10)}
		f.ctx.Init2(nil, fasthttpLogger{s.log}, false)
		return f
	}
	s.fwd.New = func() any { return &fwdOut{br: bufio.NewReaderSize(nil, 16<<10)} }
	c.SetForwardHandler(s.base, s.serveForwarded)
	return s, nil
}

// forwardedFrom describes a request another node forwarded.
type forwardedFrom struct {
	node uint64
	tls  bool            // the client's connection to the first node was TLS
	ctx  context.Context // ends when the forwarding node stops waiting, or at this server's shutdown
}

// fwdOut is the scratch space of forwarding one request.
type fwdOut struct {
	h   fasthttp.RequestHeader
	ip  []byte // the client's address, for hdrClientIP
	out []byte
	in  []byte
	rd  bytes.Reader
	br  *bufio.Reader
}

// fwdIn is the scratch space of running one forwarded request.
type fwdIn struct {
	ctx fasthttp.RequestCtx
	fw  forwardedFrom
	rd  bytes.Reader
	br  *bufio.Reader
	bw  *bufio.Writer
	w   appendWriter
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// The forwarded request's first byte: flags.
const fwdFlagTLS = 1

// serveClusterQueue runs a request for a queue on the shard's leader:
// here, or forwarded. An operation the leader refused before it changed
// anything (engine.ErrRetryOnLeader: the lead is being handed over, or
// just moved) runs again where the shard is led now, within the same
// wait as a request that finds no leader.
//
// A long poll that waited on a leader which then handed its lead over
// (engine.RetryWaitError) goes on waiting on the next leader for what was
// left of its wait, so that its client sees one ordinary receive; if no
// leader takes it within the leader wait, it is answered empty, as a long
// poll at a step-down is.
func (s *Server) serveClusterQueue(ctx *fasthttp.RequestCtx, st *reqState, op op) {
	deadline := time.Now().Add(s.opts.ClusterLeaderWait)
	for {
		if !s.routeCluster(ctx, st, &deadline) {
			return // forwarded, or answered 503
		}
		err := s.dispatch(ctx, st, op)
		if err == nil {
			return
		}
		var rw *engine.RetryWaitError
		if errors.As(err, &rw) {
			// The leader wait starts again after the poll's own wait.
			deadline = time.Now().Add(s.opts.ClusterLeaderWait)
		}
		if errors.Is(err, engine.ErrRetryOnLeader) && st.fw != nil && s.closing.Load() {
			s.answerNotRun(ctx, st) // the forwarding node runs it on the next leader
			return
		}
		// A client's own request is routed again even while this node
		// shuts down: its leads were handed over, and routeCluster
		// forwards it to the new leader once one is known, within the
		// leader wait. A long poll that waited here ends, as every long
		// poll does at shutdown.
		if !errors.Is(err, engine.ErrRetryOnLeader) || (rw != nil && s.closing.Load()) || time.Now().After(deadline) {
			if rw != nil || (st.waitCapped && errors.Is(err, engine.ErrRetryOnLeader)) {
				err = engine.ErrMessageNotExist // as a long poll at a step-down
			}
			s.fail(ctx, st, err)
			return
		}
		st.b = nil
		s.noteRerouted(st)
		time.Sleep(5 * time.Millisecond) // the hand-over's commits and election
	}
}

// retryClosedRead is the error of a read (a peek, GetQueueAttributes)
// that found its shard's broker closed while this node runs (the member
// rebuilds it, or restarts the shard in place): ErrRetryOnLeader, since a
// read changed nothing, so serveClusterQueue runs it again where the
// shard is led, within the leader wait. It was 503 "the broker is
// shutting down" (TestClusterPeekInAClosedBrokerRunsOnTheLeader). A
// change is not run again: it may have been under way when the broker
// closed.
func (s *Server) retryClosedRead(err error) error {
	if s.c != nil && !s.closing.Load() && errors.Is(err, engine.ErrClosed) {
		return engine.ErrRetryOnLeader
	}
	return err
}

// hdrWaitMs carries what is left of a long poll's wait (ms) on a request
// forwarded again after it waited on a leader that handed its lead over,
// and on the not-run answer of such a request. Only forwarded requests
// and answers are read for it (it is not signed: a client's is dropped).
const hdrWaitMs = "X-Smqd-Wait-Ms"

// capWait shortens a long poll's wait to what is left of it (a request run
// again after it waited on another leader), and reads that from a
// forwarded request.
func (s *Server) capWait(ctx *fasthttp.RequestCtx, st *reqState, opt *engine.ReceiveOptions) {
	if st.fw != nil && !st.waitCapped {
		if v := ctx.Request.Header.Peek(hdrWaitMs); len(v) > 0 {
			if ms, err := strconv.ParseUint(string(v), 10, 32); err == nil {
				st.waitLeft, st.waitCapped = min(time.Duration(ms)*time.Millisecond, engine.MaxPollingWait), true
			}
		}
	}
	if st.waitCapped {
		opt.Wait, opt.HasWait = st.waitLeft.Truncate(time.Millisecond), true
	}
}

// hdrNotRun marks a forwarded request's answer that says it did not run:
// the node it was forwarded to does not lead the shard, and knows who
// does. The forwarding node routes it again. Never sent to a client.
const hdrNotRun = "X-Smqd-Not-Run"

// routeCluster sets st.b to this node's broker of the queue's shard when
// it leads it, or forwards the request and answers it; false when the
// request is answered.
func (s *Server) routeCluster(ctx *fasthttp.RequestCtx, st *reqState, deadline *time.Time) bool {
	reads := 0 // reads run again after their leader moved (maxReadReruns)
	for {
		b, leader, err := s.c.Route(string(st.name))
		if b != nil {
			st.b = b
			return true
		}
		if st.fw != nil && (err == nil || s.closing.Load()) {
			// Forwarded here, and the shard is led elsewhere now (the lead
			// moved while the request was on its way), or this node is
			// shutting down and knows no leader: nothing ran, and the
			// forwarding node routes it again within its own wait.
			s.answerNotRun(ctx, st)
			return false
		}
		if err == nil {
			ferr := s.forward(ctx, st, leader)
			if ferr == nil {
				return false
			}
			if errors.Is(ferr, cluster.ErrCanceled) && !s.closing.Load() && st.cctx.base != nil && st.cctx.Err() != nil {
				// The client hung up on its long poll (clientwatch.go):
				// no one reads the answer, and nothing failed.
				s.fail(ctx, st, engine.ErrMessageNotExist)
				return false
			}
			if errors.Is(ferr, cluster.ErrCanceled) && s.closing.Load() {
				// Shutting down: a forwarded long poll is answered as a
				// local one is. A message the leader hands out after
				// this goes to a closed connection and becomes visible
				// again after its visibility timeout (docs/operations.md).
				s.fail(ctx, st, engine.ErrMessageNotExist)
				return false
			}
			if errors.Is(ferr, cluster.ErrTooManyForwards) {
				// Every connection to the leader is busy (those long polls
				// may hold, for a receive): nothing was sent, and the
				// leader is up. A receive is answered as one beyond
				// --max-long-polls is on a single node; anything else is
				// told so, at once, rather than waiting for a leader and
				// then blaming an election (scale audit, 2026-12-06).
				if st.op.isReceive() {
					s.fail(ctx, st, engine.ErrMessageNotExist)
				} else {
					s.writeError(ctx, st, codeServiceUnavailable, "too many requests in flight from this node to the shard's leader; retry")
				}
				return false
			}
			if errors.Is(ferr, errNotRun) {
				s.noteRerouted(st)
			}
			if errors.Is(ferr, errNotRun) && st.waitCapped {
				// A long poll that waited there: the leader wait starts
				// again after its wait.
				*deadline = time.Now().Add(s.opts.ClusterLeaderWait)
			}
			if errors.Is(ferr, cluster.ErrLeaderMoved) && refinedOp(st.op, &st.query).changesNothing() && !s.closing.Load() && reads < maxReadReruns {
				reads++
				// A read that waited on a former leader changed nothing
				// there, whether it ran or not: it runs again where the
				// shard is led now, within a new leader wait (the wait
				// for the former leader's answer used it up). It was 503
				// "may or may not have run" (TestClusterPeekInAClosedBrokerRunsOnTheLeader
				// failed so under load; flakes audit, 2026-12-07).
				s.noteRerouted(st)
				*deadline = time.Now().Add(s.opts.ClusterLeaderWait)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if !errors.Is(ferr, cluster.ErrNotSent) {
				s.log.Warn("forwarded request without an answer", "leader", leader, "err", ferr, "request_id", string(st.reqID))
				s.writeError(ctx, st, codeServiceUnavailable, "the leader of the queue's shard did not answer; the request may or may not have run: "+ferr.Error())
				return false
			}
			err = ferr
		}
		// A client's own request waits for a leader even while this node
		// shuts down: during a hand-over of its leads the new leader is
		// unknown here until it is elected.
		if time.Now().After(*deadline) {
			if st.waitCapped {
				s.fail(ctx, st, engine.ErrMessageNotExist) // as a long poll at a step-down
				return false
			}
			if err == nil {
				err = cluster.ErrNoLeader
			}
			s.writeError(ctx, st, codeServiceUnavailable, "the queue's shard has no reachable leader right now (an election or a failover is under way); retry: "+err.Error())
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// maxReadReruns bounds how often a read whose forward lost its leader
// (cluster.ErrLeaderMoved) runs again, each time within a new leader wait:
// leads that keep moving do not hold its client for good.
const maxReadReruns = 3

// noteRerouted counts a request run again on its shard's next leader,
// once however often it was.
func (s *Server) noteRerouted(st *reqState) {
	if !st.rerouted {
		st.rerouted = true
		s.rerouted.Add(1)
	}
}

// answerNotRun answers a forwarded request that did not run here: the
// forwarding node routes it again. Not counted as an error: no client
// sees this answer.
func (s *Server) answerNotRun(ctx *fasthttp.RequestCtx, st *reqState) {
	ctx.Response.Header.Set(hdrNotRun, "1")
	if st.waitCapped {
		ctx.Response.Header.Set(hdrWaitMs, strconv.FormatInt(st.waitLeft.Milliseconds(), 10))
	}
	s.writeErrorDoc(ctx, st, codeServiceUnavailable, "this node does not lead the queue's shard (its lead moved, or it is shutting down); retry")
}

// forward sends the request to leader and writes its answer into ctx.
func (s *Server) forward(ctx *fasthttp.RequestCtx, st *reqState, leader uint64) error {
	f := s.fwd.Get().(*fwdOut)
	defer func() {
		f.h.Reset()
		if cap(f.out) > 1<<20 {
			f.out = nil
		}
		if cap(f.in) > 1<<20 {
			f.in = nil
		}
		f.rd.Reset(nil)
		f.br.Reset(nil)
		s.fwd.Put(f)
	}()
	ctx.Request.Header.CopyTo(&f.h)
	f.h.Del("Expect")
	f.h.Del(hdrWaitMs)
	f.ip = s.appendClientIP(f.ip[:0], ctx)
	if len(f.ip) > 0 {
		f.h.SetBytesV(hdrClientIP, f.ip)
	} else {
		f.h.Del(hdrClientIP)
	}
	if st.waitCapped {
		f.h.Set(hdrWaitMs, strconv.FormatInt(st.waitLeft.Milliseconds(), 10))
	}
	f.h.SetContentLength(len(st.body))
	flags := byte(0)
	if st.tls {
		flags |= fwdFlagTLS
	}
	f.out = append(f.out[:0], flags)
	f.out = f.h.AppendBytes(f.out)
	f.out = append(f.out, st.body...)
	timeout := forwardTimeout(st)
	wctx := context.Background()
	if st.op.isReceive() {
		// A long poll ends at this server's shutdown, as a local one does
		// (receiveOrPeek): the caller answers MessageNotExist. It ends too
		// when the client hangs up: the leader's poll then ends
		// (engine/cluster/forward_watch.go) instead of taking a message
		// no one would get.
		wctx = s.clientContext(ctx, st)
	}
	var err error
	// Cut short if the shard's lead moves away from leader, which then
	// does not answer (engine/cluster/forward_moved.go): a leader cut off
	// from the cluster held such a request for the whole timeout.
	if st.op.isReceive() {
		// Long polls may hold only some of the connections to a leader,
		// so that other requests always find one (ErrTooManyForwards).
		f.in, err = s.c.ForwardPoll(wctx, s.c.ShardOf(string(st.name)), leader, f.out, f.in[:0], timeout)
	} else {
		f.in, err = s.c.ForwardShard(wctx, s.c.ShardOf(string(st.name)), leader, f.out, f.in[:0], timeout)
	}
	if err != nil {
		return err
	}
	f.rd.Reset(f.in)
	f.br.Reset(&f.rd)
	ctx.Response.Reset()
	if err := ctx.Response.Read(f.br); err != nil {
		resetResponse(ctx, st)
		return fmt.Errorf("cluster: the leader's answer could not be read: %w", err)
	}
	if len(ctx.Response.Header.Peek(hdrNotRun)) > 0 {
		if v := ctx.Response.Header.Peek(hdrWaitMs); len(v) > 0 {
			if ms, err := strconv.ParseUint(string(v), 10, 32); err == nil {
				st.waitLeft, st.waitCapped = min(time.Duration(ms)*time.Millisecond, engine.MaxPollingWait), true
			}
		}
		resetResponse(ctx, st)
		return fmt.Errorf("node %d no longer leads the shard: %w", leader, errNotRun)
	}
	if ctx.Response.StatusCode() >= 400 {
		// The client gets the leader's error: counted here, not there
		// (writeError; metrics audit, 2026-12-07).
		if c, ok := codeNamed(errorCodeOf(ctx)); ok {
			s.metrics.countError(c)
		}
	}
	return nil
}

// resetResponse drops what a forward put into the response and sets again
// the headers every answer of this node carries.
func resetResponse(ctx *fasthttp.RequestCtx, st *reqState) {
	ctx.Response.Reset()
	setCommonHeaders(ctx, st.reqID)
}

// errNotRun: a forwarded request did not run (hdrNotRun); route it again.
var errNotRun = fmt.Errorf("the request did not run: %w", cluster.ErrNotSent)

// serveForwarded runs a request another node forwarded and appends the
// answer (an HTTP/1.1 response) to dst.
func (s *Server) serveForwarded(ctx context.Context, from uint64, req, dst []byte) []byte {
	f := s.fwdIn.Get().(*fwdIn)
	defer func() {
		f.ctx.Request.Reset()
		f.ctx.Response.Reset()
		f.rd.Reset(nil)
		f.br.Reset(nil)
		f.w.b = nil
		s.fwdIn.Put(f)
	}()
	f.ctx.Request.Reset()
	f.ctx.Response.Reset()
	f.fw = forwardedFrom{node: from, ctx: ctx}
	if len(req) > 0 {
		f.fw.tls = req[0]&fwdFlagTLS != 0
		req = req[1:]
	}
	f.rd.Reset(req)
	f.br.Reset(&f.rd)
	if err := f.ctx.Request.ReadLimitBody(f.br, s.opts.MaxRequestBodyBytes); err != nil {
		s.log.Warn("a forwarded request could not be read", "from", from, "err", err)
		f.ctx.Response.Reset()
		f.ctx.Response.SetStatusCode(fasthttp.StatusBadRequest)
	} else {
		s.run(&f.ctx, &f.fw)
	}
	f.w.b = dst
	f.bw.Reset(&f.w)
	f.ctx.Response.Write(f.bw)
	f.bw.Flush()
	return f.w.b
}

// listQueueNames lists queue names over every shard (see the file
// comment): each shard's first limit names from the marker, and its next
// one, merged; the page is the first limit of them and the marker the one
// after.
func (s *Server) listQueueNames(prefix, marker string, limit int) ([]string, string, error) {
	return s.listNames(prefix, marker, limit, (*engine.Broker).ListQueues)
}

// listTopicNames is listQueueNames for topics (ListTopic).
func (s *Server) listTopicNames(prefix, marker string, limit int) ([]string, string, error) {
	return s.listNames(prefix, marker, limit, (*engine.Broker).ListTopics)
}

// listNames pages through the names list gives of every broker this
// server serves, merged in byte order.
func (s *Server) listNames(prefix, marker string, limit int, list func(*engine.Broker, string, string, int) ([]string, string, error)) ([]string, string, error) {
	if s.c == nil {
		b := s.broker()
		if b == nil {
			return nil, "", errReopening
		}
		return list(b, prefix, marker, limit)
	}
	var all []string
	for i, b := range s.c.Brokers() {
		if b == nil {
			return nil, "", newAPIError(codeServiceUnavailable, fmt.Sprintf("shard %d is being reopened on this node; retry", i))
		}
		names, next, err := list(b, prefix, marker, limit)
		if err != nil {
			return nil, "", err
		}
		all = append(all, names...)
		if next != "" {
			all = append(all, next)
		}
	}
	slices.Sort(all)
	if len(all) > limit {
		return all[:limit], all[limit], nil
	}
	return all, "", nil
}

// clusterReadBarrier lets this node's replicas apply what every shard's
// leader has committed before a list is read from them
// (engine/cluster/read.go), so that a queue or topic made through another
// node a moment ago is in it. A single node has nothing to wait for.
func (s *Server) clusterReadBarrier() error {
	if s.c == nil {
		return nil
	}
	bctx, cancel := context.WithTimeout(s.base, s.opts.ClusterLeaderWait)
	err := s.c.ReadBarrier(bctx)
	cancel()
	if err != nil {
		return newAPIError(codeServiceUnavailable, "a shard's leader did not answer (an election or a failover is under way); retry: "+err.Error())
	}
	return nil
}

// topicInfo returns a topic's attributes from this node's replica of its
// shard (ListTopic with metadata).
func (s *Server) topicInfo(name string) (engine.TopicInfo, error) {
	b := s.broker()
	if s.c != nil {
		b = s.c.Brokers()[s.c.ShardOf(name)]
	}
	if b == nil {
		return engine.TopicInfo{}, engine.ErrTopicNotExist
	}
	return b.GetTopicAttributes(name)
}

// queueInfo returns a queue's attributes from this node's replica of its
// shard (ListQueue with metadata).
func (s *Server) queueInfo(name string) (engine.QueueInfo, error) {
	if s.c == nil {
		b := s.broker()
		if b == nil {
			return engine.QueueInfo{}, errReopening
		}
		return b.GetQueueAttributes(name)
	}
	b := s.c.Brokers()[s.c.ShardOf(name)]
	if b == nil {
		return engine.QueueInfo{}, engine.ErrQueueNotExist
	}
	return b.GetQueueAttributes(name)
}

// brokers returns the brokers this server serves: its broker, or the
// node's replicas of every shard (nil where one is being reopened).
func (s *Server) brokers() []*engine.Broker {
	if s.c == nil {
		return []*engine.Broker{s.broker()}
	}
	return s.c.Brokers()
}

// brokerStats is what the broker collector reads: queue counters from the
// brokers that take changes (a cluster node's leaders, so that a sum over
// the nodes counts each queue once), storage counters from every broker.
type brokerStats struct {
	Queues    []engine.QueueStats
	LongPolls int64
	Storage   []engine.StorageStats
	Push      engine.PushStats // summed over the brokers
	// Walked counts the queues Stats walked, on every broker: a cluster
	// node's replicas of shards it does not lead too, which Queues leaves
	// out but which cost a gather as much (sharedExposition).
	Walked int
	// Brokers is, by shard, the broker Storage and Push were read from
	// (nil: none now) and what it counted: the collector carries a
	// replaced broker's counters (brokerCollector.carry).
	Brokers []brokerSample
}

// brokerSample is one shard's broker at a scrape and its counters.
type brokerSample struct {
	b       *engine.Broker
	storage engine.StorageStats
	push    engine.PushStats
}

func (s *Server) metricStats() brokerStats {
	var out brokerStats
	for i, b := range s.brokers() {
		if b == nil {
			out.Brokers = append(out.Brokers, brokerSample{})
			continue
		}
		st := b.Stats()
		out.Brokers = append(out.Brokers, brokerSample{b, st.Storage, st.Push})
		out.Walked += len(st.Queues)
		out.Storage = append(out.Storage, st.Storage)
		if s.c == nil || s.c.Leading(i) {
			out.Queues = append(out.Queues, st.Queues...)
			out.LongPolls += st.LongPolls
		}
		// Each broker counts the pushes it made while it led its shard,
		// and the backlog of the subscriptions it pushes now: a sum over
		// the nodes counts each once.
		out.Push.Subscriptions += st.Push.Subscriptions
		out.Push.Backlog += st.Push.Backlog
		out.Push.Delivered += st.Push.Delivered
		out.Push.Failed += st.Push.Failed
		out.Push.DeadLettered += st.Push.DeadLettered
		out.Push.Discarded += st.Push.Discarded
		out.Push.Relays += st.Push.Relays
		out.Push.RelayBacklog += st.Push.RelayBacklog
	}
	if s.c != nil && s.c.DiskFull() {
		// A shard that failed for lack of space waits to restart with no
		// broker to say so: with every shard so, smqd_disk_full said 0
		// beside smqd_disk_free_bytes 0 (disk-full audit, 2026-12-06).
		// smqd_disk_full is the largest over the shards.
		out.Storage = append(out.Storage, engine.StorageStats{DiskFull: true})
	}
	return out
}

// health is nil while the server can serve every queue.
func (s *Server) health() error {
	if s.c == nil {
		b := s.broker()
		if b == nil {
			return errReopening
		}
		return b.Health()
	}
	if err := s.c.Health(); err != nil {
		return err
	}
	for i, b := range s.c.Brokers() {
		if b == nil {
			return fmt.Errorf("shard %d is being reopened", i)
		}
		if err := b.Health(); err != nil && !errors.Is(err, engine.ErrNotLeader) {
			return fmt.Errorf("shard %d: %w", i, err) // a follower's broker takes no changes by design
		}
	}
	return nil
}

// diskFull reports whether any broker refuses new messages for want of
// disk space.
func (s *Server) diskFull() bool {
	if s.c != nil && s.c.DiskFull() { // a shard failed for lack of space has no broker
		return true
	}
	for _, b := range s.brokers() {
		// Not Stats().Storage.DiskFull: Stats walks every queue and
		// takes each stripe's lock, 2.7 ms and 4.6 MB with 10,000 queues
		// for every unsigned GET /healthz (security2 audit).
		if b != nil && b.DiskFull() {
			return true
		}
	}
	return false
}

// serveClusterStatus answers GET /cluster: the node's view as JSON.
func (s *Server) serveClusterStatus(ctx *fasthttp.RequestCtx, st *reqState) {
	if s.c == nil {
		s.refuse(ctx, st, newAPIError(codeInvalidRequestURL, "this server is a single node, not a cluster member (start smqd with --cluster-peers)"))
		return
	}
	b, err := json.MarshalIndent(s.c.Status(), "", "  ")
	if err != nil {
		s.fail(ctx, st, err)
		return
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBody(append(b, '\n'))
}

// changeMembers serves the signed admin operations PUT
// /cluster/nodes/{id}?raft=HOST:PORT (add a member) and DELETE
// /cluster/nodes/{id} (remove one). They answer 204 once this node has
// applied the change in every shard.
func (s *Server) changeMembers(ctx *fasthttp.RequestCtx, st *reqState, idSeg []byte) {
	if s.c == nil {
		s.fail(ctx, st, newAPIError(codeInvalidRequestURL, "this server is a single node, not a cluster member"))
		return
	}
	id, err := strconv.ParseUint(string(idSeg), 10, 64)
	// Only the plain spelling: the policy resource is the segment as
	// written, so /cluster/nodes/09 passed a Deny written for
	// /cluster/nodes/9 and then acted on node 9 (security audit,
	// 2026-12-06).
	if err != nil || id == 0 || strconv.FormatUint(id, 10) != string(idSeg) {
		s.fail(ctx, st, newAPIError(codeInvalidArgument, "the node id in the path must be a positive integer, not "+strconv.Quote(string(idSeg))))
		return
	}
	wait, cancel := context.WithTimeout(s.base, 30*time.Second)
	defer cancel()
	if st.op == opClusterAddNode {
		addr := string(ctx.QueryArgs().Peek("raft"))
		if addr == "" {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, "give the new node's raft address: PUT /cluster/nodes/{id}?raft=HOST:PORT"))
			return
		}
		if s.c.MemberOfEveryShard(id) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, fmt.Sprintf("node %d is a member already", id)))
			return
		}
		err = s.c.AddMember(wait, id, addr)
	} else {
		if !slices.Contains(s.c.Members(), id) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, fmt.Sprintf("node %d is not a member", id)))
			return
		}
		if string(ctx.QueryArgs().Peek("force")) == "true" {
			err = s.c.ForceRemoveMember(wait, id)
		} else {
			err = s.c.RemoveMember(wait, id)
		}
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			s.fail(ctx, st, err)
			return
		}
		if errors.Is(err, cluster.ErrNotAMember) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, "this node is not a member of the cluster (yet): send the request to a member"))
			return
		}
		if errors.Is(err, cluster.ErrRemoveSelf) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, fmt.Sprintf("node %d cannot remove itself (it would never see its removal through): send the request to another member", id)))
			return
		}
		if errors.Is(err, cluster.ErrQuorumAtRisk) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, "node not removed: "+err.Error()+" (DELETE /cluster/nodes/{id}?force=true, smqctl cluster rm --force)"))
			return
		}
		if errors.Is(err, cluster.ErrMemberExists) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, "node not added: "+err.Error()))
			return
		}
		if errors.Is(err, cluster.ErrMemberUnreachable) {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, "node not added: "+err.Error()))
			return
		}
		if errors.Is(err, cluster.ErrMembershipBusy) {
			// Retryable: once the change under way ends, or the one cut
			// short is repeated (the text names the shards).
			s.writeError(ctx, st, codeServiceUnavailable, "the membership change was not made, or not everywhere: "+err.Error())
			return
		}
		s.writeError(ctx, st, codeServiceUnavailable, "the membership change did not complete: "+err.Error())
		return
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
}

// forwardTimeout bounds the wait for a forwarded request's answer: 10 s,
// and for a receive its own wait on top: what is left of it (a long poll
// run again on the next leader), else its waitseconds, else the longest
// a queue's PollingWaitSeconds may make it (only the leader knows it).
// Every forwarded receive waited 40 s for a leader that did not answer (a
// link cut one way), waitseconds=1 too (survive audit, 2026-12-07).
func forwardTimeout(st *reqState) time.Duration {
	const answer = 10 * time.Second
	if !st.op.isReceive() {
		return answer
	}
	switch {
	case st.waitCapped:
		return answer + st.waitLeft
	case st.query.waitSeconds.present:
		if w, err := secondsInRange("waitseconds", st.query.waitSeconds.val, 0, engine.MaxPollingWait); err == nil {
			return answer + w
		}
	}
	return answer + engine.MaxPollingWait
}
