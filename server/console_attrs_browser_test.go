package server

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// docs/console.md, the Queue page: "Save sends only the fields edited".
// A field the user emptied (or that holds no number) has nothing to send:
// the page left the attribute out of its SetQueueAttributes, which changes
// nothing, and said "Saved: VisibilityTimeout." (console audit,
// 2026-12-07); so did a "Maximum receives" edited alone on a queue with no
// dead-letter queue, whose value was dropped. Each is refused on the page
// now, naming the field, and the queue is left as it was. A malformed
// address (#/queue/%E0) threw in the router and froze the page it left.
func TestConsoleAttributesRefuseEmptyFieldsInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	c := env.client()
	defer c.close()
	c.mustCreate("attrs")
	ctx := browser(t)
	var log consoleLog
	log.start(ctx)
	base := "http://" + env.addr
	signIn(t, ctx, base)
	step(t, ctx, "open the queue",
		chromedp.Navigate(base+"/console/#/queue/attrs"),
		until(`(document.querySelector('#attr-VisibilityTimeout')||{}).value === '30'`))

	// save empties the result line, sets the fields (selector: value),
	// clicks Save and returns the result line once there is one.
	save := func(what string, fields map[string]string) (text, class string) {
		t.Helper()
		js := `document.querySelector('#attrs-result').textContent = ''; document.querySelector('#attrs-result').className = '';`
		for sel, v := range fields {
			js += `document.querySelector('` + sel + `').value = '` + v + `';`
		}
		step(t, ctx, what,
			chromedp.Evaluate[chromedp.Void](`(() => {`+js+`})()`),
			press("#save-attrs"),
			until(`document.querySelector('#attrs-result').textContent !== ''`))
		class, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#attrs-result').className`))
		if err != nil {
			t.Fatalf("class of the result: %v", err)
		}
		return pageText(t, ctx, "#attrs-result"), class
	}

	text, class := save("save an emptied visibility timeout", map[string]string{"#attr-VisibilityTimeout": ""})
	if class != "error" || !strings.Contains(text, "Visibility timeout") {
		t.Errorf("an emptied field saved: %s %q", class, text)
	}
	text, class = save("save a maximum receive count without a dead-letter queue",
		map[string]string{"#attr-VisibilityTimeout": "30", "#attr-MaxReceiveCount": "3"})
	if class != "error" || !strings.Contains(text, "dead-letter queue") {
		t.Errorf("a maximum receive count without a dead-letter queue saved: %s %q", class, text)
	}
	q, _ := env.broker.Queue("attrs")
	if info, _ := q.Attributes(); info.Config.VisibilityTimeout != 30*time.Second {
		t.Errorf("visibility timeout %v", info.Config.VisibilityTimeout)
	}
	// A field filled again saves as before.
	text, class = save("save a visibility timeout", map[string]string{"#attr-MaxReceiveCount": "", "#attr-VisibilityTimeout": "45"})
	if class != "note" || text != "Saved: VisibilityTimeout." {
		t.Errorf("a visibility timeout was not saved: %s %q", class, text)
	}
	if info, _ := q.Attributes(); info.Config.VisibilityTimeout != 45*time.Second {
		t.Errorf("visibility timeout %v after the save", info.Config.VisibilityTimeout)
	}

	step(t, ctx, "a malformed address",
		chromedp.Navigate(base+"/console/#/queue/%E0%A4%A"),
		until(`(document.querySelector('main p.error')||{}).textContent.includes('not a well-formed address')`))
	if errs := log.errors(); len(errs) > 0 {
		t.Errorf("the page logged %d error(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
