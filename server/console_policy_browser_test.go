package server

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// The console with a key held by a policy (--policy-file): it signs in
// although it may not list queues (AccessDenied comes after the signature
// is checked), the queue list says what it may not do, and on a queue it
// may use it sends, and is refused what its policy does not allow, with
// the action named on the page; a refused delete leaves the queue's page
// refreshing.
func TestConsoleRestrictedKeyInBrowser(t *testing.T) {
	p := authzPolicies(t, `{"Policies": {"orders": {"Statement": [
	  {"Effect": "Allow", "Action": "mns:GetQueueAttributes", "Resource": "acs:mns:*:*:/queues/orders"},
	  {"Effect": "Allow", "Action": ["mns:SendMessage", "mns:ReceiveMessage", "mns:DeleteMessage"], "Resource": "acs:mns:*:*:/queues/orders/messages"}]}},
	 "Keys": {"testid": ["SmqdAdministratorAccess"], "other": ["orders"]}}`)
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console, o.Policies = true, p }})
	admin := env.client()
	defer admin.close()
	admin.mustCreate("orders")
	ctx := browser(t)
	base := "http://" + env.addr
	step(t, ctx, "open the console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#signin")))
	step(t, ctx, "sign in with the restricted key",
		chromedp.SendKeys(chromedp.CSS("#access-key-id"), "other"),
		chromedp.SendKeys(chromedp.CSS("#access-key-secret"), "othersecret"),
		chromedp.Click(chromedp.CSS("#signin-button")),
		chromedp.WaitVisible(chromedp.CSS("#create-queue")),
		until(`(document.querySelector('#poll-error')||{}).textContent.includes('AccessDenied') && document.querySelector('#poll-error').textContent.includes('mns:ListQueue')`))
	step(t, ctx, "open its queue",
		chromedp.Navigate(base+"/console/#/queue/orders"),
		until(`(document.querySelector('#attr-VisibilityTimeout')||{}).value === '30'`))
	step(t, ctx, "send through the page",
		chromedp.SendKeys(chromedp.CSS("#send-body"), "from the console"),
		press("#send"),
		until(`(document.querySelector('#send-result')||{}).textContent.includes('Sent')`))
	step(t, ctx, "peek, which its policy does not allow",
		press("#peek"),
		until(`document.body.textContent.includes('mns:BatchPeekMessage')`))
	if got := authzQueue(t, admin, "orders").ActiveMessages; got != 1 {
		t.Fatalf("orders holds %d messages, want the 1 sent", got)
	}
	// A refused delete leaves the page showing the queue, refreshed: a
	// message sent behind its back shows up.
	step(t, ctx, "delete the queue, which its policy does not allow",
		press("#delete-queue"),
		press("#delete-queue-confirm"),
		until(`(document.querySelector('#attrs-result')||{}).textContent.includes('mns:DeleteQueue')`))
	admin.mustSend("orders", "behind its back", "")
	step(t, ctx, "the page goes on refreshing", textIs("#count-active", "2"))
	// A wrong secret is still refused at sign-in.
	step(t, ctx, "sign in with a wrong secret",
		chromedp.Navigate(base+"/console/#/signin"),
		chromedp.WaitVisible(chromedp.CSS("#signin")),
		chromedp.SendKeys(chromedp.CSS("#access-key-id"), "other"),
		chromedp.SendKeys(chromedp.CSS("#access-key-secret"), "wrong"),
		chromedp.Click(chromedp.CSS("#signin-button")),
		until(`(document.querySelector('#signin-error')||{}).textContent.includes('SignatureDoesNotMatch')`))
}
