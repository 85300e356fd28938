package server

import "testing"

// TestAPICompatDocEdges pins edges docs/api-compatibility.md states
// (apicompat audit, 2026-12-07): the peek forms never wait, so they do not
// read waitseconds at all, not even a value a receive refuses; an empty
// queue or topic name is no route (400 InvalidRequestURL), not a length
// error; every response names the server.
func TestAPICompatDocEdges(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	for _, w := range []string{"31", "-1", "abc"} {
		wantError(t, c.get("/queues/q/messages?peekonly=true&waitseconds="+w), 404, "MessageNotExist")
		wantError(t, c.get("/queues/q/messages?peekonly=true&numOfMessages=2&waitseconds="+w), 404, "MessageNotExist")
		wantError(t, c.get("/queues/q/messages?waitseconds="+w), 400, "InvalidArgument")
	}
	wantError(t, c.put("/queues/", ""), 400, "InvalidRequestURL")
	wantError(t, c.put("/topics/", ""), 400, "InvalidRequestURL")
	for _, r := range []*response{c.get("/queues/q"), c.get("/queues/none")} {
		if got := r.header.Get("Server"); got != "smqd" {
			t.Errorf("Server header %q", got)
		}
	}
}
