package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/smqd/smqd/engine"
)

// The console's dead-letter features and purge in a browser: the policy set and
// turned off on the queue page, a dead-lettered message's properties shown
// by peek, and the redrive (static/redrive.js): the message goes back to
// its source queue byte for byte with its properties less the DLQ ones,
// one it cannot place stays and is named, and goes once a queue is given.
func TestConsoleRedriveInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	b := env.broker
	for _, q := range []string{"dead", "orders", "elsewhere"} {
		if _, err := b.CreateQueue(q, engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	dead, _ := b.Queue("dead")
	orders, _ := b.Queue("orders")
	elsewhere, _ := b.Queue("elsewhere")
	str := func(name, value string, system bool) engine.Property {
		return engine.Property{Name: []byte(name), Value: []byte(value), Type: engine.PropString, System: system}
	}
	body := "line one\r\nline <two> & \"three\"\r"
	kept := []engine.Property{str("k", "v <&>", false), {Name: []byte("bin"), Value: []byte("AAEC/w=="), Type: engine.PropBinary},
		str("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true)}
	dlqProps := []engine.Property{str("DLQMessageType", "QUEUE", true), str("DLQSourceArn", b.DeadLetterSourceArn("orders"), true),
		str("DLQOriginMessageId", "00000000000000010000000000000001", true)}
	if _, err := dead.Send([]engine.SendEntry{
		{Body: []byte(body), Priority: 4, Properties: append(append([]engine.Property{}, kept...), dlqProps...)},
		{Body: []byte("sent here directly")},
		// A sender's DLQSourceArn naming a queue that dead-letters
		// elsewhere: it stays (security audit, 2026-12-06).
		{Body: []byte("forged source"), Properties: []engine.Property{str("DLQMessageType", "QUEUE", true), str("DLQSourceArn", b.DeadLetterSourceArn("elsewhere"), true)}},
	}, nil); err != nil {
		t.Fatal(err)
	}

	ctx := browser(t)
	var log consoleLog
	log.start(ctx)
	base := "http://" + env.addr
	signIn(t, ctx, base)

	// The policy, on the source queue's page.
	step(t, ctx, "open orders", chromedp.Navigate(base+"/console/#/queue/orders"), chromedp.WaitVisible(chromedp.CSS("#attrs-form")),
		until(`document.querySelector('#attr-VisibilityTimeout').value === '30'`))
	step(t, ctx, "set a dead-letter policy",
		chromedp.SetValue(chromedp.CSS("#attr-DeadLetterTargetQueue"), "dead"),
		chromedp.SetValue(chromedp.CSS("#attr-MaxReceiveCount"), "3"),
		chromedp.Click(chromedp.CSS("#save-attrs")),
		until(`document.querySelector('#attrs-result').className === 'note'`))
	if info, _ := orders.Attributes(); info.Config.DeadLetterQueue != "dead" || info.Config.MaxReceiveCount != 3 {
		t.Errorf("policy after the console's save: %+v", info.Config)
	}
	step(t, ctx, "turn it off",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#attr-DeadLetterTargetQueue').value = ''`),
		chromedp.Click(chromedp.CSS("#save-attrs")),
		until(`document.querySelector('#attrs-result').className === 'note' && document.querySelector('#attr-MaxReceiveCount').value === ''`))
	if info, _ := orders.Attributes(); info.Config.DeadLetterQueue != "" || info.Config.MaxReceiveCount != 0 {
		t.Errorf("policy after turning it off: %+v", info.Config)
	}

	// orders dead-letters into dead again (its messages may go back), set
	// elsewhere while the page is open: the form follows, and a save of
	// another field keeps it. The form was filled once, and a Save wrote
	// every field back: the policy went off and the timeout back to 30 s
	// (console audit, 2026-12-06).
	if err := b.SetQueueAttributes("orders", engine.ConfigPatch{DeadLetterQueue: ptr("dead"), MaxReceiveCount: ptr(3),
		VisibilityTimeout: ptr(120 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "the form follows a change made elsewhere",
		until(`document.querySelector('#attr-DeadLetterTargetQueue').value === 'dead' && document.querySelector('#attr-VisibilityTimeout').value === '120'`))
	step(t, ctx, "save another field",
		chromedp.SetValue(chromedp.CSS("#attr-PollingWaitSeconds"), "5"),
		chromedp.Click(chromedp.CSS("#save-attrs")),
		until(`document.querySelector('#attrs-result').className === 'note'`),
		textIs("#attrs-result", "Saved: PollingWaitSeconds."))
	if info, _ := orders.Attributes(); info.Config.DeadLetterQueue != "dead" || info.Config.MaxReceiveCount != 3 || info.Config.VisibilityTimeout != 120*time.Second || info.Config.PollingWait != 5*time.Second {
		t.Errorf("after a save of the polling wait: %+v", info.Config)
	}
	step(t, ctx, "save with nothing changed",
		chromedp.Click(chromedp.CSS("#save-attrs")),
		until(`document.querySelector('#attrs-result').className !== 'note'`),
		textIs("#attrs-result", "Nothing to save: no field was changed."))

	// The dead-letter queue's page: peek shows where a message came from.
	step(t, ctx, "open dead", chromedp.Navigate(base+"/console/#/queue/dead"), chromedp.WaitVisible(chromedp.CSS("#redrive-form")),
		textIs("#count-active", "3"))
	step(t, ctx, "peek", chromedp.Click(chromedp.CSS("#peek")),
		until(`[...document.querySelectorAll('#peek-rows td.props')].some((td) => td.textContent.includes('DLQSourceArn=acs:mns:local:0:/queues/orders'))`))

	// Into itself: refused, as smqctl refuses it; once every message was
	// sent again into dead without the properties naming its source
	// (console audit, 2026-12-06).
	step(t, ctx, "redrive into itself",
		chromedp.SetValue(chromedp.CSS("#redrive-to"), "dead"),
		chromedp.Click(chromedp.CSS("#redrive")),
		until(`document.querySelector('#redrive-result').className !== 'note' && document.querySelector('#redrive-result').textContent.includes('dead itself')`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#redrive-to').value = ''`))
	step(t, ctx, "peek again", chromedp.Click(chromedp.CSS("#peek")),
		until(`[...document.querySelectorAll('#peek-rows td.props')].some((td) => td.textContent.includes('DLQSourceArn=acs:mns:local:0:/queues/orders'))`))
	step(t, ctx, "redrive", chromedp.Click(chromedp.CSS("#redrive")),
		until(`document.querySelector('#redrive-result').textContent.startsWith('Moved 1 message(s): 1 to orders. 2 left here.')`),
		until(`document.querySelectorAll('#redrive-left tr').length === 2 && document.querySelector('#redrive-left').textContent.includes('no DLQSourceArn') && document.querySelector('#redrive-left').textContent.includes('whose dead-letter queue is not dead')`))
	got := receiveVisible(t, orders)
	if len(got) != 1 {
		t.Fatalf("orders holds %d messages after the redrive, want 1", len(got))
	}
	if m := got[0]; string(m.Body) != body || m.Priority != 4 || propsText(m.Properties) != propsText(kept) {
		t.Errorf("the copy: %q, priority %d, properties %s; want %q, 4, %s", m.Body, m.Priority, propsText(m.Properties), body, propsText(kept))
	}
	if got := receiveVisible(t, elsewhere); len(got) != 0 {
		t.Fatalf("a sender's DLQSourceArn made the redrive write to a queue that dead-letters elsewhere: %q", got[0].Body)
	}
	// The two left are visible again at once (not after 30 s), and go
	// when a queue is named.
	step(t, ctx, "left visible again", textIs("#count-active", "2"))
	step(t, ctx, "redrive to orders",
		chromedp.SetValue(chromedp.CSS("#redrive-to"), "orders"),
		chromedp.Click(chromedp.CSS("#redrive")),
		until(`document.querySelector('#redrive-result').className === 'note' && document.querySelector('#redrive-result').textContent === 'Moved 2 message(s): 2 to orders.'`),
		textIs("#count-active", "0"))
	if got := receiveVisible(t, orders); len(got) != 2 || string(got[0].Body)+"|"+string(got[1].Body) != "sent here directly|forged source" && string(got[1].Body)+"|"+string(got[0].Body) != "sent here directly|forged source" {
		t.Errorf("orders after the second redrive: %+v", got)
	}
	if info, _ := dead.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
		t.Errorf("dead after both: %+v", info)
	}
	// Purge, after a second click: every message goes, the queue stays.
	if _, err := orders.Send([]engine.SendEntry{{Body: []byte("x")}, {Body: []byte("y")}}, nil); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "open orders again", chromedp.Navigate(base+"/console/#/queue/orders"), chromedp.WaitVisible(chromedp.CSS("#purge-queue")),
		textIs("#count-active", "2"))
	step(t, ctx, "purge", press("#purge-queue"), press("#purge-queue-confirm"),
		textIs("#attrs-result", "Purged 5 message(s)."), textIs("#count-active", "0"))
	if info, _ := orders.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
		t.Errorf("orders after the console's purge: %+v", info)
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Errorf("the page logged %d error(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

func receiveVisible(t *testing.T, q *engine.Queue) []engine.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ms, err := q.Receive(ctx, engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
	if errors.Is(err, engine.ErrMessageNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func propsText(ps []engine.Property) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%v:%s=%s(%d);", p.System, p.Name, p.Value, p.Type)
	}
	return b.String()
}
