package server

import (
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestForwardedReceiveWaitsForItsOwnWaitOnly: the answer of a forwarded
// receive is awaited 10 s beyond the receive's own wait (what is left of
// it, else its waitseconds), the longest polling wait only when neither
// is known; a leader that never answers (a link cut one way) kept a
// receive with waitseconds=1 for 40 s.
func TestForwardedReceiveWaitsForItsOwnWaitOnly(t *testing.T) {
	receive := func(wait string) *reqState {
		st := &reqState{op: opReceiveMessage}
		if wait != "" {
			st.query.waitSeconds = queryParam{present: true, val: []byte(wait)}
		}
		return st
	}
	capped := receive("20")
	capped.waitLeft, capped.waitCapped = 3*time.Second, true
	for _, c := range []struct {
		name string
		st   *reqState
		want time.Duration
	}{
		{"a send", &reqState{op: opSendMessage}, 10 * time.Second},
		{"waitseconds=1", receive("1"), 11 * time.Second},
		{"waitseconds=0", receive("0"), 10 * time.Second},
		{"no waitseconds", receive(""), 10*time.Second + engine.MaxPollingWait},
		{"a bad waitseconds", receive("x"), 10*time.Second + engine.MaxPollingWait},
		{"3 s left of a rerouted poll", capped, 13 * time.Second},
	} {
		if got := forwardTimeout(c.st); got != c.want {
			t.Errorf("%s: forwarded answer awaited %v, want %v", c.name, got, c.want)
		}
	}
}
