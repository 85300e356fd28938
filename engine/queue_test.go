package engine

import (
	"context"
	"crypto/md5"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSendReceiveDelete(t *testing.T) {
	b, clk := openTest(t, Options{})
	q := mustQueue(t, b, "q1", DefaultQueueConfig())
	res, err := q.Send([]SendEntry{{Body: []byte("hello world")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(MD5Hex(nil, res[0].MD5)); got != "5EB63BBBE01EEED093CB22BB8F5ACDC3" {
		t.Fatalf("md5 %s", got)
	}
	clk.Advance(5 * time.Millisecond)
	msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[0]
	if string(m.Body) != "hello world" || m.ID != res[0].ID || m.DequeueCount != 1 || m.Priority != 8 {
		t.Fatalf("got %+v", m)
	}
	if !m.EnqueueTime.Equal(t0) || !m.FirstDequeueTime.Equal(t0.Add(5*time.Millisecond)) || !m.NextVisibleTime.Equal(t0.Add(30005*time.Millisecond)) {
		t.Fatalf("times %v %v %v", m.EnqueueTime, m.FirstDequeueTime, m.NextVisibleTime)
	}
	checkInvariants(t, q)
	info, _ := q.Attributes()
	if info.Active != 0 || info.Inactive != 1 {
		t.Fatalf("counts %+v", info)
	}
	errs := make([]error, 1)
	if n, err := q.Delete([]ReceiptHandle{m.Handle}, errs); err != nil || n != 0 {
		t.Fatalf("delete %d %v %v", n, err, errs)
	}
	if n, _ := q.Delete([]ReceiptHandle{m.Handle}, errs); n != 1 || !errors.Is(errs[0], ErrMessageNotExist) {
		t.Fatalf("second delete %d %v", n, errs[0])
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{}, nil); !errors.Is(err, ErrMessageNotExist) {
		t.Fatalf("empty receive: %v", err)
	}
	checkInvariants(t, q)
}

func TestVisibilityTimeoutRedelivers(t *testing.T) {
	b, clk := openTest(t, Options{})
	q := mustQueue(t, b, "q1", DefaultQueueConfig())
	q.Send([]SendEntry{{Body: []byte("x")}}, nil)
	m1, _ := q.Receive(context.Background(), ReceiveOptions{}, nil)
	clk.Advance(29999 * time.Millisecond)
	if _, err := q.Receive(context.Background(), ReceiveOptions{}, nil); !errors.Is(err, ErrMessageNotExist) {
		t.Fatalf("visible too early: %v", err)
	}
	clk.Advance(time.Millisecond)
	m2, err := q.Receive(context.Background(), ReceiveOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2[0].DequeueCount != 2 || !m2[0].FirstDequeueTime.Equal(m1[0].FirstDequeueTime) {
		t.Fatalf("redelivery %+v", m2[0])
	}
	errs := make([]error, 1)
	q.Delete([]ReceiptHandle{m1[0].Handle}, errs)
	if !errors.Is(errs[0], ErrMessageNotExist) {
		t.Fatalf("old handle: %v", errs[0])
	}
	checkInvariants(t, q)
}

func TestLongPollWokenBySend(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "q1", DefaultQueueConfig())
	done := make(chan []Message)
	go func() {
		m, err := q.Receive(context.Background(), ReceiveOptions{Wait: 30 * time.Second, HasWait: true}, nil)
		if err != nil {
			t.Error(err)
		}
		done <- m
	}()
	deadline := time.Now().Add(5 * time.Second)
	for q.waiters.waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	q.Send([]SendEntry{{Body: []byte("wake")}}, nil)
	select {
	case m := <-done:
		if string(m[0].Body) != "wake" {
			t.Fatalf("%q", m[0].Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken")
	}
}

// A batch send answers each message's MD5 (MessageBodyMD5), computed eight
// at a time where the CPU can (md5x): every batch size, bodies of uneven
// lengths, each against crypto/md5, and the same MD5 again at receive.
func TestSendBatchMD5s(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "md5s", DefaultQueueConfig())
	rnd := rand.New(rand.NewPCG(7, 7))
	want := map[string][md5.Size]byte{}
	for n := 1; n <= MaxBatch; n++ {
		entries := make([]SendEntry, n)
		for i := range entries {
			body := make([]byte, 1+rnd.IntN(3000))
			for k := range body {
				body[k] = 'a' + byte(rnd.IntN(26))
			}
			entries[i].Body = body
		}
		res, err := q.Send(entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if w := md5.Sum(entries[i].Body); r.MD5 != w {
				t.Fatalf("batch of %d, message %d (%d bytes): MD5 %x, want %x", n, i, len(entries[i].Body), r.MD5, w)
			}
			want[string(entries[i].Body)] = r.MD5
		}
	}
	for len(want) > 0 {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch}, nil)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("receive: %d messages, %v; %d still to come", len(msgs), err, len(want))
		}
		for _, m := range msgs {
			if w, ok := want[string(m.Body)]; !ok || m.MD5 != w {
				t.Fatalf("received MD5 %x for a body sent with %x (known: %v)", m.MD5, w, ok)
			}
			delete(want, string(m.Body))
		}
	}
}

// A Delay or Wait set without its Has flag is refused, not silently
// replaced by the queue's default (a message meant for an hour later was
// sent Active).
func TestDelayAndWaitNeedTheirFlags(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	if _, err := q.Send([]SendEntry{{Body: []byte("x"), Delay: time.Hour}}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Delay without HasDelay: %v", err)
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Wait: time.Second}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Wait without HasWait: %v", err)
	}
	if info, _ := q.Attributes(); info.Active+info.Delayed != 0 {
		t.Errorf("a refused send stored a message: %+v", info)
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("x"), Delay: time.Hour, HasDelay: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if info, _ := q.Attributes(); info.Delayed != 1 {
		t.Errorf("with HasDelay: %+v", info)
	}
}
