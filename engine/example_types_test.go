package engine_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"time"

	"github.com/smqd/smqd/engine"
)

// A FakeClock makes time a test's choice: delays, visibility timeouts,
// retention and long-poll waits end when the test advances it, never by
// sleeping.
func ExampleNewFakeClock() {
	clk := engine.NewFakeClock(exampleStart)
	b, _ := engine.Open(engine.Options{Clock: clk})
	defer b.Close()
	b.CreateQueue("reminders", engine.DefaultQueueConfig())
	q, _ := b.Queue("reminders")
	q.SendOne(context.Background(), engine.SendEntry{Body: []byte("in an hour"), Delay: time.Hour, HasDelay: true})

	_, err := q.ReceiveOne(context.Background(), 0)
	fmt.Println(errors.Is(err, engine.ErrMessageNotExist)) // still Delayed
	clk.Advance(time.Hour)
	m, _ := q.ReceiveOne(context.Background(), 0)
	fmt.Printf("%s, sent at %s, now %s\n", m.Body, m.EnqueueTime.Format(time.TimeOnly), clk.Now().Format(time.TimeOnly))
	// Output:
	// true
	// in an hour, sent at 15:04:05, now 16:04:05
}

func ExampleFakeClock_Advance() {
	clk := engine.NewFakeClock(exampleStart)
	clk.AfterFunc(2*time.Second, func() { fmt.Println("two seconds") })
	clk.AfterFunc(time.Second, func() { fmt.Println("one second") })

	clk.Advance(5 * time.Second) // fires both, in deadline order
	fmt.Println(clk.Now().Sub(exampleStart))
	// Output:
	// one second
	// two seconds
	// 5s
}

func ExampleFakeClock_Pending() {
	clk := engine.NewFakeClock(exampleStart)
	t := clk.AfterFunc(time.Minute, func() {})
	clk.AfterFunc(time.Second, func() {})
	fmt.Println(clk.Pending()[0].Sub(exampleStart), len(clk.Pending()))
	t.Stop()
	fmt.Println(len(clk.Pending()))
	// Output:
	// 1s 2
	// 1
}

func ExampleFakeClock_Set() {
	clk := engine.NewFakeClock(exampleStart)
	clk.AfterFunc(time.Hour, func() { fmt.Println("fired") })
	clk.Set(exampleStart.Add(24 * time.Hour))
	fmt.Println(clk.Now().Format(time.DateTime))
	// Output:
	// fired
	// 2026-01-03 15:04:05
}

// The daemon's clock; OffsetClock shifts it (smqd --clock-offset, for
// fault tests of a node whose clock is wrong).
func ExampleOffsetClock() {
	ahead := engine.OffsetClock(time.Hour)
	d := ahead.Now().Sub(engine.SystemClock().Now())
	fmt.Println(d > 59*time.Minute && d <= time.Hour)
	// Output: true
}

func ExampleDefaultQueueConfig() {
	cfg := engine.DefaultQueueConfig()
	fmt.Println(cfg.Delay, cfg.MaxMessageBytes, cfg.Retention, cfg.VisibilityTimeout, cfg.PollingWait)
	// Output: 0s 65536 96h0m0s 30s 0s
}

func ExampleQueueConfig_Validate() {
	cfg := engine.DefaultQueueConfig()
	fmt.Println(cfg.Validate())
	cfg.PollingWait = time.Minute
	fmt.Println(cfg.Validate())
	// Output:
	// <nil>
	// engine: invalid argument: PollingWaitSeconds must be between 0 and 30 seconds
}

func ExampleConfigPatch_Apply() {
	delay := 5 * time.Second
	cfg := engine.ConfigPatch{Delay: &delay}.Apply(engine.DefaultQueueConfig())
	fmt.Println(cfg.Delay, cfg.VisibilityTimeout) // only Delay changed
	// Output: 5s 30s
}

// An *ArgumentError names the field and its bounds; errors.Is matches it
// with ErrInvalidArgument.
func ExampleArgumentError() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")

	_, err := q.SendOne(context.Background(), engine.SendEntry{Body: []byte("x"), Priority: 17})
	var ae *engine.ArgumentError
	fmt.Println(errors.As(err, &ae), errors.Is(err, engine.ErrInvalidArgument))
	fmt.Printf("%s: %s\n", ae.Field, ae.Msg)
	// Output:
	// true true
	// Priority: must be between 1 and 16
}

// A receipt handle travels as text (the MNS ReceiptHandle); parse it back
// to delete or change the message.
func ExampleParseReceiptHandle() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	ctx := context.Background()
	q.SendOne(ctx, engine.SendEntry{Body: []byte("order 7")})
	m, _ := q.ReceiveOne(ctx, 0)

	text := m.Handle.String() // what a client holds
	h, err := engine.ParseReceiptHandle([]byte(text))
	fmt.Println(err, h == m.Handle, q.DeleteOne(ctx, h))

	_, err = engine.ParseReceiptHandle([]byte("not a handle"))
	fmt.Println(errors.Is(err, engine.ErrReceiptHandleError))
	// Output:
	// <nil> true <nil>
	// true
}

func ExampleReceiptHandle_IsZero() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(context.Background(), engine.SendEntry{Body: []byte("order 8")})

	peeked, _ := q.Peek(1, nil)
	received, _ := q.ReceiveOne(context.Background(), 0)
	fmt.Println(peeked[0].Handle.IsZero(), received.Handle.IsZero())
	// Output: true false
}

func ExampleMessageID_String() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	ctx := context.Background()
	sent, _ := q.SendOne(ctx, engine.SendEntry{Body: []byte("order 9")})
	got, _ := q.ReceiveOne(ctx, 0)

	fmt.Println(len(sent.ID.String()), got.ID == sent.ID) // 32 upper-case hex digits, the MNS MessageId
	// Output: 32 true
}

func ExampleMD5Hex() {
	fmt.Printf("%s\n", engine.MD5Hex(nil, md5.Sum([]byte("hello")))) // the MNS MessageBodyMD5
	// Output: 5D41402ABC4B2A76B9719D911017C592
}

func ExampleValidateQueueName() {
	for _, name := range []string{"orders-2026", "-orders", "orders_eu", ""} {
		fmt.Printf("%q: %v\n", name, engine.ValidateQueueName(name))
	}
	// Output:
	// "orders-2026": <nil>
	// "-orders": engine: invalid queue name
	// "orders_eu": engine: invalid queue name
	// "": engine: queue name length out of range
}

func ExampleParseSyncMode() {
	mode, err := engine.ParseSyncMode("interval") // smqd --sync interval
	fmt.Println(mode, err)
	opts := engine.Options{Dir: "data"}
	opts.WAL.Sync = mode // a durable broker that fsyncs at most every WAL.SyncInterval

	_, err = engine.ParseSyncMode("sometimes")
	fmt.Println(err != nil)
	// Output:
	// interval <nil>
	// true
}

func ExampleMessageState_String() {
	for _, s := range []engine.MessageState{engine.Delayed, engine.Active, engine.Inactive, engine.Deleted, engine.Expired} {
		fmt.Print(s, " ")
	}
	fmt.Println()
	// Output: Delayed Active Inactive Deleted Expired
}

func ExampleFakeClock_AfterFunc() {
	clk := engine.NewFakeClock(exampleStart)
	t := clk.AfterFunc(time.Minute, func() { fmt.Println("fired at", clk.Now().Format(time.TimeOnly)) })
	clk.Advance(30 * time.Second)
	t.Reset(time.Minute) // a minute from now: 15:05:35
	clk.Advance(time.Hour)
	// Output: fired at 15:05:35
}

func ExampleFakeClock_Now() {
	clk := engine.NewFakeClock(exampleStart)
	clk.Advance(90 * time.Second)
	fmt.Println(clk.Now().Format(time.DateTime))
	// Output: 2026-01-02 15:05:35
}

// The daemon's clock: the zero Options use it.
func ExampleSystemClock() {
	clk := engine.SystemClock()
	fired := make(chan struct{})
	clk.AfterFunc(time.Millisecond, func() { close(fired) })
	<-fired
	fmt.Println(!clk.Now().Before(time.Now().Add(-time.Minute)))
	// Output: true
}

func ExampleArgumentError_Is() {
	cfg := engine.DefaultQueueConfig()
	cfg.MaxMessageBytes = 10
	err := cfg.Validate()
	fmt.Println(errors.Is(err, engine.ErrInvalidArgument), errors.Is(err, engine.ErrInvalidQueueName))
	// Output: true false
}

// AppendText writes the id into a buffer of the caller's, without
// allocating: what a server does for every response.
func ExampleMessageID_AppendText() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	res, _ := q.SendOne(context.Background(), engine.SendEntry{Body: []byte("order 10")})

	buf := make([]byte, 0, 64)
	buf = append(buf, "<MessageId>"...)
	buf = res.ID.AppendText(buf)
	buf = append(buf, "</MessageId>"...)
	fmt.Println(len(buf), string(buf[11:43]) == res.ID.String())
	// Output: 55 true
}

func ExampleReceiptHandle_String() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(context.Background(), engine.SendEntry{Body: []byte("order 11")})
	m, _ := q.ReceiveOne(context.Background(), 0)

	text := m.Handle.String()
	fmt.Println(text[:2], string(m.Handle.AppendText(nil)) == text) // AppendText: the same, into a buffer
	// Output: 1- true
}
