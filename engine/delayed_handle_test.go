package engine

import (
	"context"
	"testing"
	"time"
)

// The handle of a delayed send (handle.go): Delete and ChangeVisibility
// take it while the message is Delayed, across a restart too; a receive,
// a visibility change or the end of the delay ends it.
func TestDelayedSendHandle(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	q := mustQueue(t, b, "d", DefaultQueueConfig())
	res, err := q.Send([]SendEntry{
		{Body: []byte("a"), Delay: time.Minute, HasDelay: true},
		{Body: []byte("b"), Delay: time.Minute, HasDelay: true},
		{Body: []byte("c"), Delay: time.Minute, HasDelay: true},
		{Body: []byte("now")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res[3].Handle.IsZero() {
		t.Fatal("a message that is not delayed got a handle")
	}
	for i := 0; i < 3; i++ {
		if res[i].Handle.IsZero() {
			t.Fatalf("delayed message %d got no handle", i)
		}
	}
	errs := make([]error, 1)
	if _, err := q.Delete([]ReceiptHandle{res[0].Handle}, errs); err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	if _, err := q.Delete([]ReceiptHandle{res[0].Handle}, errs); err != nil || errs[0] != ErrMessageNotExist {
		t.Fatal("second delete:", err, errs[0])
	}
	checkInvariants(t, q)
	// Crash and restart: the delete stays, the other handles still work.
	crashBroker(b)
	b = openDurableTest(t, dir, clk, nil)
	defer b.Close()
	q, err = b.Queue("d")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := q.Attributes(); info.Delayed != 2 || info.Active != 1 {
		t.Fatalf("after restart: %+v", info)
	}
	nh, next, err := q.ChangeVisibility(res[1].Handle, 10*time.Minute)
	if err != nil || !next.Equal(clk.Now().Add(10*time.Minute).Truncate(time.Millisecond)) {
		t.Fatal(err, next)
	}
	if _, _, err := q.ChangeVisibility(res[1].Handle, time.Minute); err != ErrMessageNotExist {
		t.Fatal("old handle after a change:", err)
	}
	if info, _ := q.Attributes(); info.Delayed != 2 {
		t.Fatalf("a changed delayed message is no longer Delayed: %+v", info)
	}
	// c's delay ends: its handle dies; b's moved end has not come.
	clk.Advance(time.Minute)
	if _, err := q.Delete([]ReceiptHandle{res[2].Handle}, errs); err != nil || errs[0] != ErrMessageNotExist {
		t.Fatal("handle after the delay ended:", err, errs[0])
	}
	got, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
	if err != nil || len(got) != 2 {
		t.Fatal(err, len(got))
	}
	if _, err := q.Delete([]ReceiptHandle{nh}, errs); err != nil || errs[0] != nil {
		t.Fatal("changed handle before its end:", err, errs[0])
	}
	if info, _ := q.Attributes(); info.Delayed != 0 || info.Inactive != 2 {
		t.Fatalf("end: %+v", info)
	}
	checkInvariants(t, q)
}
