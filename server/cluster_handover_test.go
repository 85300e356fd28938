package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A planned leader change costs clients nothing (engine/cluster/transfer.go,
// serveClusterQueue): while clients send, receive and delete through every
// node, the shard's leader hands its lead over (HandOverLeads, as smqd does
// on SIGTERM) twice. Every request is answered as without a hand-over: no
// 503, no other error, and every acknowledged send is received or still in
// the queue at the end.
func TestClusterHandOverCostsClientsNothing(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	wantStatus(t, c.envs[0].client().put("/queues/ho", ""), 201)
	l := startClusterLoad(t, c, "ho", []int{0, 1, 2})
	// Let the load run, then move the lead twice: from its first leader,
	// then from the second (a leaving node is handed no lead again).
	l.wait(300)
	for range 2 {
		lead := c.leaderOf("ho")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := c.nodes[lead].HandOverLeads(ctx)
		cancel()
		if err != nil {
			t.Fatalf("node %d hands its lead over: %v", lead+1, err)
		}
		if now := c.leaderOf("ho"); now == lead {
			t.Fatalf("node %d still leads after handing its lead over", lead+1)
		}
		l.wait(l.requests.Load() + 300)
	}
	l.finish(0)
}

// Removing the member that leads a shard (smqctl cluster rm) costs
// clients nothing either: it hands the lead over first, and the next
// leader makes the change (engine/cluster/members.go, proposeMember). It
// used to propose its own removal, lead on until it applied and then stop
// leading with no successor, so the requests it held got 503s.
func TestClusterRemovingTheLeaderCostsClientsNothing(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	wantStatus(t, c.envs[0].client().put("/queues/rm", ""), 201)
	lead := c.leaderOf("rm")
	var stay []int
	for i := range 3 {
		if i != lead {
			stay = append(stay, i)
		}
	}
	l := startClusterLoad(t, c, "rm", stay) // through the members that stay
	l.wait(300)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err := c.nodes[stay[0]].RemoveMember(ctx, uint64(lead+1))
	cancel()
	if err != nil {
		t.Fatalf("removing node %d: %v", lead+1, err)
	}
	if now := c.leaderOf("rm"); now == lead {
		t.Fatalf("node %d leads after its removal", lead+1)
	}
	l.wait(l.requests.Load() + 300)
	l.finish(stay[0])
}

// clusterLoad is clients sending, receiving and deleting through some of
// a cluster's nodes, and what they were told.
type clusterLoad struct {
	t        *testing.T
	c        *clusterEnv
	queue    string
	stop     atomic.Bool
	mu       sync.Mutex
	failures []string
	sent     map[string]bool
	deleted  map[string]bool
	requests atomic.Int64
	wg       sync.WaitGroup
}

// startClusterLoad starts two workers per node of envs on queue.
func startClusterLoad(t *testing.T, c *clusterEnv, queue string, envs []int) *clusterLoad {
	l := &clusterLoad{t: t, c: c, queue: queue, sent: map[string]bool{}, deleted: map[string]bool{}}
	fail := func(what string, r *response) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.failures) < 20 {
			l.failures = append(l.failures, fmt.Sprintf("%s: %d %s", what, r.status, r.body))
		}
	}
	path := "/queues/" + queue + "/messages"
	for w := range 2 * len(envs) {
		cl := c.envs[envs[w%len(envs)]].client()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; !l.stop.Load() && n < 20000; n++ {
				body := fmt.Sprintf("w%d-%d", w, n)
				r := cl.post(path, sendBody(body, ""))
				l.requests.Add(1)
				if r.status != 201 {
					fail("send "+body, r)
					continue
				}
				l.mu.Lock()
				l.sent[body] = true
				l.mu.Unlock()
				r = cl.get(path + "?waitseconds=0")
				l.requests.Add(1)
				if r.status == 404 {
					continue // empty for now: another worker took them
				}
				if r.status != 200 {
					fail("receive", r)
					continue
				}
				var m xMessage
				decode(t, r, &m)
				r = cl.del(path+"?ReceiptHandle="+m.ReceiptHandle, "")
				l.requests.Add(1)
				if r.status != 204 {
					fail("delete "+m.MessageBody, r)
					continue
				}
				l.mu.Lock()
				l.deleted[m.MessageBody] = true
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// wait waits until the workers have made n requests.
func (l *clusterLoad) wait(n int64) {
	l.t.Helper()
	clusterEventually(l.t, "requests under way", func() error {
		if got := l.requests.Load(); got < n {
			return fmt.Errorf("%d requests", got)
		}
		return nil
	})
}

// finish stops the workers and fails the test if any request failed or an
// acknowledged send is gone: what was not deleted is still in the queue,
// drained through node env.
func (l *clusterLoad) finish(env int) {
	l.t.Helper()
	l.stop.Store(true)
	l.wg.Wait()
	if len(l.failures) > 0 {
		l.t.Fatalf("%d+ requests failed, first: %v", len(l.failures), l.failures)
	}
	cl := l.c.envs[env].client()
	path := "/queues/" + l.queue + "/messages"
	for {
		r := cl.get(path + "?waitseconds=0")
		if r.status == 404 {
			break
		}
		wantStatus(l.t, r, 200)
		var m xMessage
		decode(l.t, r, &m)
		l.deleted[m.MessageBody] = true
		wantStatus(l.t, cl.del(path+"?ReceiptHandle="+m.ReceiptHandle, ""), 204)
	}
	for body := range l.sent {
		if !l.deleted[body] {
			l.t.Errorf("acknowledged send %s is gone", body)
		}
	}
	l.t.Logf("%d requests, %d messages sent", l.requests.Load(), len(l.sent))
}

// A request forwarded to a node that does not lead the queue's shard (the
// lead moved while it was on its way) is answered at once with the
// not-run mark, which the forwarding node takes as "route it again"; it
// used to wait there for the whole leader wait and answer 503.
func TestClusterForwardedToAFollowerIsNotRun(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/moved", ""), 201)
	lead := c.leaderOf("moved")
	follower := (lead + 1) % 3
	raw := "\x00" + c.envs[follower].client().build(req{method: "POST", target: "/queues/moved/messages", body: sendBody("x", "")})
	out := string(c.envs[follower].srv.serveForwarded(context.Background(), uint64(lead+1), []byte(raw), nil))
	if !strings.Contains(out, hdrNotRun+": 1") {
		t.Fatalf("a request forwarded to a follower was answered without the not-run mark: %q", out)
	}
	q, err := c.nodes[lead].Broker(0).Queue("moved")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := q.Attributes(); err != nil || info.Active != 0 {
		t.Fatalf("the not-run request ran: %+v %v", info, err)
	}
}

// A long poll waiting on a leader that hands its lead over goes on
// waiting on the next leader for the rest of its wait (serveClusterQueue,
// engine.RetryWaitError), through the node the client used: messages sent
// after the hand-over reach both polls, the one sent to the old leader
// and the one another node forwarded there. They used to be answered
// empty at the step-down.
func TestClusterLongPollSurvivesAHandOver(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/lp", ""), 201)
	lead := c.leaderOf("lp")
	lb := c.nodes[lead].Broker(0)
	other := (lead + 1) % 3
	direct := async(c.envs[lead], "/queues/lp/messages?waitseconds=30")
	forwarded := async(c.envs[other], "/queues/lp/messages?waitseconds=30")
	waitLongPolls(t, "both long polls wait on the leader", lb, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[lead].HandOverLeads(ctx); err != nil {
		t.Fatal(err)
	}
	now := c.leaderOf("lp")
	nb := c.nodes[now].Broker(0)
	clusterEventually(t, "both long polls wait on the new leader", func() error {
		select {
		case r := <-direct:
			return fmt.Errorf("the direct poll ended at the hand-over: %v %v", r.r, r.err)
		case r := <-forwarded:
			return fmt.Errorf("the forwarded poll ended at the hand-over: %v %v", r.r, r.err)
		default:
		}
		if n := nb.Stats().LongPolls; n != 2 {
			return fmt.Errorf("%d long polls waiting on node %d", n, now+1)
		}
		return nil
	})
	cl := c.envs[now].client()
	cl.mustSend("lp", "one", "")
	cl.mustSend("lp", "two", "")
	got := map[string]bool{}
	for _, p := range []<-chan pollResult{direct, forwarded} {
		r := result(t, p)
		wantStatus(t, r, 200)
		var m xMessage
		decode(t, r, &m)
		got[m.MessageBody] = true
	}
	if !got["one"] || !got["two"] {
		t.Fatalf("the polls received %v, want one and two", got)
	}
}

// A long poll forwarded again after it waited on another leader carries
// what is left of its wait (hdrWaitMs), and the next leader waits only
// that: here 50 ms of a 30 s poll on an empty queue, answered empty. (The
// 25 s below only bounds a hang: without the header's cap the poll waits
// its whole 30 s.)
func TestClusterForwardedPollKeepsItsRemainingWait(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	wantStatus(t, c.envs[0].client().put("/queues/rest", ""), 201)
	// The preferred leader (node 1) first, so that no balancer hand-over
	// moves the poll on.
	clusterEventually(t, "node 1 leads the shard", func() error {
		if !c.nodes[0].Leading(0) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	lead := c.leaderOf("rest")
	raw := "\x00" + c.envs[lead].client().build(req{method: "GET", target: "/queues/rest/messages?waitseconds=30",
		headers: map[string]string{hdrWaitMs: "50"}})
	done := make(chan string, 1)
	go func() {
		done <- string(c.envs[lead].srv.serveForwarded(context.Background(), uint64((lead+1)%3+1), []byte(raw), nil))
	}()
	select {
	case out := <-done:
		if !strings.HasPrefix(out, "HTTP/1.1 404") || !strings.Contains(out, "<Code>MessageNotExist</Code>") {
			t.Fatalf("want an empty receive, got %q", out)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the forwarded poll waited its whole wait, not what was left of it")
	}
}

// A node that has begun to shut down (its leads handed over) answers a
// request forwarded to it that finds no leader there with the not-run
// mark at once, so that the forwarding node, which is not stopping, runs
// it on the next leader; it used to answer 503, which reached the client
// (smqd's SIGTERM hand-over, cmd/smqd TestDaemonClusterSIGTERMHandsLeadsOver).
func TestClusterClosingNodeAnswersForwardedNotRun(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	wantStatus(t, c.envs[0].client().put("/queues/closing", ""), 201)
	c.stop(1)
	c.stop(2)
	clusterEventually(t, "node 1 knows no leader", func() error {
		if _, lead, err := c.nodes[0].Route("closing"); err == nil {
			return fmt.Errorf("routed to node %d", lead)
		}
		return nil
	})
	srv := c.envs[0].srv
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	raw := "\x00" + c.envs[0].client().build(req{method: "POST", target: "/queues/closing/messages", body: sendBody("x", "")})
	out := string(srv.serveForwarded(context.Background(), 2, []byte(raw), nil))
	if !strings.Contains(out, hdrNotRun+": 1") {
		t.Fatalf("a closing node without a leader answered a forwarded request without the not-run mark: %q", out)
	}
}

// The same for a request forwarded to a stopping node whose broker still
// yields (its hand-over under way): the refusal (engine.ErrRetryOnLeader)
// comes back not-run, and the send does not run there.
func TestClusterClosingYieldingLeaderAnswersForwardedNotRun(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/yielding", ""), 201)
	lead := c.leaderOf("yielding")
	b := c.nodes[lead].Broker(0)
	if err := b.Yield(true); err != nil {
		t.Fatal(err)
	}
	srv := c.envs[lead].srv
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	from := uint64((lead+1)%3 + 1)
	raw := "\x00" + c.envs[lead].client().build(req{method: "POST", target: "/queues/yielding/messages", body: sendBody("x", "")})
	out := string(srv.serveForwarded(context.Background(), from, []byte(raw), nil))
	if !strings.Contains(out, hdrNotRun+": 1") {
		t.Fatalf("a closing, yielding leader answered a forwarded request without the not-run mark: %q", out)
	}
	q, err := b.Queue("yielding")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := q.Attributes(); err != nil || info.Active != 0 {
		t.Fatalf("the not-run request ran: %+v %v", info, err)
	}
}

// A client's own request on a leader whose server is shutting down,
// refused by its yielding broker (its lead is being handed over), runs on
// the shard's next leader: the client sees one ordinary answer, not 503.
// The request is held at the server's door until the broker yields and
// the shutdown has begun, so that it meets both.
func TestClusterClosingLeaderRunsItsClientsRequestOnTheNextLeader(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/direct", ""), 201)
	lead := c.leaderOf("direct")
	srv := c.envs[lead].srv
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(o op) {
		if o == opSendMessage {
			once.Do(func() { close(entered); <-gate })
		}
	}
	srv.testHook.Store(&hook)
	res := make(chan *response, 1)
	cl := c.envs[lead].client()
	go func() { res <- cl.post("/queues/direct/messages", sendBody("direct", "")) }()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the send never reached the leader's server")
	}
	srv.testHook.Store(nil)
	// Held at the door, the request has not read the wait yet (gate
	// orders this write before its read): long enough for the hand-over
	// below on a loaded machine.
	srv.opts.ClusterLeaderWait = 20 * time.Second
	if err := c.nodes[lead].Broker(0).Yield(true); err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	clusterEventually(t, "the leader's shutdown begun", func() error {
		if !srv.closing.Load() {
			return fmt.Errorf("not closing yet")
		}
		return nil
	})
	close(gate)
	var early *response
	clusterEventually(t, "the send refused by the yielding broker", func() error {
		select {
		case early = <-res:
			return nil
		default:
		}
		if srv.rerouted.Load() == 0 {
			return fmt.Errorf("not refused yet")
		}
		return nil
	})
	if early != nil {
		t.Fatalf("a client's send on a closing, yielding leader was answered before the lead moved: %d %s", early.status, early.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[lead].HandOverLeads(ctx); err != nil {
		t.Fatalf("node %d hands its lead over: %v", lead+1, err)
	}
	var r *response
	select {
	case r = <-res:
	case <-time.After(30 * time.Second):
		t.Fatal("the send was never answered")
	}
	wantStatus(t, r, 201)
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// It ran once, on the new leader.
	other := c.envs[(lead+1)%3].client()
	got := other.get("/queues/direct/messages?waitseconds=1")
	wantStatus(t, got, 200)
	var m xMessage
	decode(t, got, &m)
	if m.MessageBody != "direct" {
		t.Fatalf("received %q, want the send's body", m.MessageBody)
	}
	wantStatus(t, other.del("/queues/direct/messages?ReceiptHandle="+m.ReceiptHandle, ""), 204)
	wantStatus(t, other.get("/queues/direct/messages?waitseconds=0"), 404)
}

// A peek forwarded to a leader that hands its lead over before it answers
// (here the leader's server holds it at its door) runs again on the next
// leader: a peek changes nothing, so the forwarding node routes it again
// when the lead moved while it waited (engine/cluster's ErrLeaderMoved).
// It was answered 503 "the request may or may not have run", which
// failed TestClusterPeekInAClosedBrokerRunsOnTheLeader under load.
func TestClusterForwardedPeekRunsAgainWhenTheLeadMoves(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled()
	lead := c.leaderOf("moving")
	lc := c.envs[lead].client()
	defer lc.close()
	wantStatus(t, lc.put("/queues/moving", ""), 201)
	sent := lc.mustSend("moving", "peek me", "")
	srv := c.envs[lead].srv
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(o op) {
		if o == opReceiveMessage { // the family: the peek is told apart later
			once.Do(func() { close(entered); <-gate })
		}
	}
	srv.testHook.Store(&hook)
	defer close(gate)
	peek := async(c.envs[(lead+1)%3], "/queues/moving/messages?peekonly=true")
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the forwarded peek never reached the leader's server")
	}
	srv.testHook.Store(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[lead].HandOverLeads(ctx); err != nil {
		t.Fatal(err)
	}
	if r := result(t, peek); r.status != 200 || !strings.Contains(string(r.body), sent.MessageId) {
		t.Fatalf("peek: %d %s; want 200 with %s", r.status, r.body, sent.MessageId)
	}
}
