package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, "msg="+msg+" ") {
			out = append(out, line)
		}
	}
	return out
}

// The audit log has one line per control-plane operation run (created,
// changed, deleted; refused ones too, with their error), with the key and
// the client, and none for messages or reads.
func TestAuditLog(t *testing.T) {
	var logs lockedBuffer
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	c := env.client()
	defer c.close()
	c.mustCreate("q")
	wantStatus(t, c.put("/queues/q?metaoverride=true", `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`), 204)
	c.mustSend("q", "not audited", "")
	c.mustReceive("q")
	wantStatus(t, c.get("/queues/q"), 200)
	wantStatus(t, c.get("/queues"), 200)
	wantStatus(t, c.put("/topics/t", ""), 201)
	wantStatus(t, c.put("/topics/t/subscriptions/s", `<Subscription><Endpoint>acs:mns:cn-hangzhou:1:queues/q</Endpoint></Subscription>`), 201)
	wantStatus(t, c.post("/topics/t/messages", `<Message><MessageBody>not audited</MessageBody></Message>`), 201)
	wantStatus(t, c.del("/topics/t/subscriptions/s", ""), 204)
	wantStatus(t, c.del("/topics/t", ""), 204)
	wantStatus(t, c.del("/queues/q", ""), 204)
	wantError(t, c.put("/queues/bad_name", ""), 400, "InvalidQueueName") // refused before it runs
	wantError(t, c.put("/queues/q?metaoverride=true", `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`), 404, "QueueNotExist")
	got := logs.lines("audit")
	want := []string{
		"op=CreateQueue resource=/queues/q status=201",
		"op=SetQueueAttributes resource=/queues/q status=204",
		"op=CreateTopic resource=/topics/t status=201",
		"op=Subscribe resource=/topics/t/subscriptions/s status=201",
		"op=Unsubscribe resource=/topics/t/subscriptions/s status=204",
		"op=DeleteTopic resource=/topics/t status=204",
		"op=DeleteQueue resource=/queues/q status=204",
		"op=SetQueueAttributes resource=/queues/q status=404",
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) || !strings.Contains(got[i], "access_key_id="+testKeyID) || !strings.Contains(got[i], "client=127.0.0.1:") {
			t.Errorf("audit line %d: %s\nwant %s, the key and the client", i, got[i], w)
		}
	}
	if !strings.Contains(got[len(got)-1], "error=QueueNotExist") {
		t.Errorf("a failed operation's line has no error code: %s", got[len(got)-1])
	}
}

// In a cluster a forwarded operation is logged once, by the leader that
// runs it, with the client's address and the node it came through.
func TestAuditLogCluster(t *testing.T) {
	var logs lockedBuffer
	c := startCluster(t, 3, 1, func(c *clusterEnv) { c.logTo = &logs })
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	lead := c.leaderOf("q")
	entry := (lead + 1) % 3
	viaEntry := c.envs[entry].client()
	defer viaEntry.close()
	wantStatus(t, viaEntry.put("/queues/q", ""), 201)
	got := logs.lines("audit")
	if len(got) != 1 {
		t.Fatalf("%d audit lines for one forwarded CreateQueue:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, w := range []string{"node=" + fmt.Sprint(lead+1), "op=CreateQueue", "status=201", "client=127.0.0.1", "via_node=" + fmt.Sprint(entry+1)} {
		if !strings.Contains(got[0], w) {
			t.Errorf("no %s in %s", w, got[0])
		}
	}
}
