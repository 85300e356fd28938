package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemberRetryFindsTheChangeMade: a membership change whose first
// attempt timed out at the client but was made by the node is found made
// by the retry ("node 2 is not a member"), which is success; the same
// answer to a first attempt is an error (the long run failed a cycle on
// the retry's 400).
func TestMemberRetryFindsTheChangeMade(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-release // the change is made, but the answer comes after the client's timeout
		}
		w.WriteHeader(400)
		w.Write([]byte(`<Error><Code>InvalidArgument</Code><Message>node 2 is not a member</Message></Error>`))
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(strings.TrimPrefix(srv.URL, "http://"), "id", "secret", 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Member(ctx, 2, ""); err != nil {
		t.Fatalf("a retry that finds the removal made: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	// A first answer "not a member" is the caller's mistake.
	if err := c.Member(ctx, 2, ""); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("removing a non-member: %v, want the 400", err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d attempts in all, want 3 (a first 400 is not retried)", n)
	}
}
