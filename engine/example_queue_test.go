package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smqd/smqd/engine"
)

// exampleQueue opens an in-memory broker on a fake clock with one queue.
func exampleQueue(name string, cfg engine.QueueConfig) (*engine.Broker, *engine.Queue, *engine.FakeClock) {
	clk := engine.NewFakeClock(exampleStart)
	b, err := engine.Open(engine.Options{Clock: clk})
	if err != nil {
		panic(err)
	}
	if _, err := b.CreateQueue(name, cfg); err != nil {
		panic(err)
	}
	q, _ := b.Queue(name)
	return b, q, clk
}

// Send stores up to 16 messages in one call; results come back in entry
// order. A bad entry fails the whole batch before anything is stored.
func ExampleQueue_Send() {
	b, q, _ := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()

	res, err := q.Send([]engine.SendEntry{
		{Body: []byte("hello")},
		{Body: []byte("urgent"), Priority: 1},                             // 1 is the highest priority, 16 the lowest
		{Body: []byte("tomorrow"), Delay: 24 * time.Hour, HasDelay: true}, // Delayed for a day
	}, nil)
	fmt.Println(len(res), err)
	fmt.Printf("%s\n", engine.MD5Hex(nil, res[0].MD5)) // the MD5 of "hello"

	_, err = q.Send([]engine.SendEntry{{Body: []byte("fine")}, {Body: nil}}, nil)
	fmt.Println(err)
	info, _ := q.Attributes()
	fmt.Println(info.Active, info.Delayed)
	// Output:
	// 3 <nil>
	// 5D41402ABC4B2A76B9719D911017C592
	// engine: invalid argument: MessageBody must not be empty
	// 2 1
}

// Receive takes up to Max messages, highest priority first. With nothing to
// take, it waits (a long poll) up to Wait, and returns as soon as one
// message arrives.
func ExampleQueue_Receive() {
	b, q, _ := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()
	ctx := context.Background()

	// A short poll (no wait) of an empty queue.
	_, err := q.Receive(ctx, engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
	fmt.Println(errors.Is(err, engine.ErrMessageNotExist))

	// A long poll: the message sent meanwhile ends the wait.
	go q.SendOne(ctx, engine.SendEntry{Body: []byte("arrived while waiting")})
	msgs, err := q.Receive(ctx, engine.ReceiveOptions{Max: 16, Wait: 20 * time.Second, HasWait: true}, nil)
	fmt.Printf("%d %v %s\n", len(msgs), err, msgs[0].Body)

	// A batch, in priority order; dst's slices are reused when given.
	q.Send([]engine.SendEntry{{Body: []byte("low"), Priority: 16}, {Body: []byte("high"), Priority: 1}, {Body: []byte("default")}}, nil)
	msgs, _ = q.Receive(ctx, engine.ReceiveOptions{Max: 16}, msgs[:0])
	for _, m := range msgs {
		fmt.Printf("%s (priority %d), visible again at %s\n", m.Body, m.Priority, m.NextVisibleTime.Format(time.TimeOnly))
	}
	// Output:
	// true
	// 1 <nil> arrived while waiting
	// high (priority 1), visible again at 15:04:35
	// default (priority 8), visible again at 15:04:35
	// low (priority 16), visible again at 15:04:35
}

// Delete takes up to 16 receipt handles and says, for each, whether it
// worked: a handle works once, and only until its message is visible again.
func ExampleQueue_Delete() {
	b, q, _ := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()
	q.Send([]engine.SendEntry{{Body: []byte("a")}, {Body: []byte("b")}}, nil)
	msgs, _ := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16}, nil)

	handles := []engine.ReceiptHandle{msgs[0].Handle, msgs[1].Handle, msgs[0].Handle}
	errs := make([]error, len(handles))
	failed, err := q.Delete(handles, errs)
	fmt.Println(failed, err)
	fmt.Println(errs[0], errs[1], errors.Is(errs[2], engine.ErrMessageNotExist)) // the third: deleted already
	// Output:
	// 1 <nil>
	// <nil> <nil> true
}

// Purge deletes every message the queue holds (Active, received,
// delayed) and keeps the queue; the handles of purged messages stop
// working.
func ExampleQueue_Purge() {
	b, q, _ := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()
	q.Send([]engine.SendEntry{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("later"), Delay: time.Hour, HasDelay: true}}, nil)
	msgs, _ := q.Receive(context.Background(), engine.ReceiveOptions{Max: 1}, nil)

	n, err := q.Purge()
	fmt.Println(n, err)
	info, _ := q.Attributes()
	fmt.Println(info.Active, info.Inactive, info.Delayed)
	err = q.DeleteOne(context.Background(), msgs[0].Handle)
	fmt.Println(errors.Is(err, engine.ErrMessageNotExist))
	// Output:
	// 3 <nil>
	// 0 0 0
	// true
}

// Peek shows Active messages, highest priority first, without receiving
// them: no receipt handle, no change.
func ExampleQueue_Peek() {
	b, q, _ := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()
	q.Send([]engine.SendEntry{{Body: []byte("first")}, {Body: []byte("second")}, {Body: []byte("VIP"), Priority: 2}}, nil)

	msgs, err := q.Peek(2, nil)
	for _, m := range msgs {
		fmt.Printf("%s, handle %v, received %d times\n", m.Body, !m.Handle.IsZero(), m.DequeueCount)
	}
	info, _ := q.Attributes()
	fmt.Println(err, info.Active)
	// Output:
	// VIP, handle false, received 0 times
	// first, handle false, received 0 times
	// <nil> 3
}

// ChangeVisibility gives a consumer more time (or less) before a received
// message is visible again; it returns a new receipt handle, and the old one
// stops working.
func ExampleQueue_ChangeVisibility() {
	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = 30 * time.Second
	b, q, clk := exampleQueue("orders", cfg)
	defer b.Close()
	ctx := context.Background()
	q.SendOne(ctx, engine.SendEntry{Body: []byte("long job")})
	m, _ := q.ReceiveOne(ctx, 0)
	fmt.Println("visible again at", m.NextVisibleTime.Format(time.TimeOnly))

	h, next, err := q.ChangeVisibility(m.Handle, 5*time.Minute)
	fmt.Println("visible again at", next.Format(time.TimeOnly), err)

	clk.Advance(time.Minute) // past the first 30 s: still invisible
	_, err = q.ReceiveOne(ctx, 0)
	fmt.Println(errors.Is(err, engine.ErrMessageNotExist))

	clk.Advance(4 * time.Minute) // the 5 minutes are over: it is back
	again, _ := q.ReceiveOne(ctx, 0)
	fmt.Printf("%s, received %d times\n", again.Body, again.DequeueCount)
	_, _, err = q.ChangeVisibility(h, time.Minute) // h died when the message became visible
	fmt.Println(errors.Is(err, engine.ErrMessageNotExist))
	// Output:
	// visible again at 15:04:35
	// visible again at 15:09:05 <nil>
	// true
	// long job, received 2 times
	// true
}

// Attributes is GetQueueAttributes on a queue in hand.
func ExampleQueue_Attributes() {
	b, q, clk := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()
	q.Send([]engine.SendEntry{{Body: []byte("soon"), Delay: 10 * time.Second, HasDelay: true}}, nil)

	info, _ := q.Attributes()
	fmt.Println(info.Name, info.Active, info.Delayed)
	clk.Advance(10 * time.Second)
	info, _ = q.Attributes()
	fmt.Println(info.Name, info.Active, info.Delayed)
	// Output:
	// orders 0 1
	// orders 1 0
}

func ExampleQueue_Name() {
	b, q, _ := exampleQueue("orders", engine.DefaultQueueConfig())
	defer b.Close()
	fmt.Println(q.Name())
	// Output: orders
}
