package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/smqd/smqd/engine"
)

// exampleStart is the fake clock's start in the examples: a fixed time, so
// that the times they print do not change.
var exampleStart = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// An in-memory broker: the zero Options. Nothing survives Close.
func ExampleOpen() {
	b, err := engine.Open(engine.Options{})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	created, err := b.CreateQueue("orders", engine.DefaultQueueConfig())
	fmt.Println(created, err, b.Stats().Storage.Durable)
	// Output: true <nil> false
}

// A durable broker keeps its queues and messages in Dir: a write-ahead log
// (acknowledged after its fsync by default, SyncAlways) and an index. What
// was sent before Close is there after the next Open.
func ExampleOpen_durable() {
	dir, err := os.MkdirTemp("", "smqd-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(ctx, engine.SendEntry{Body: []byte("order 1, kept on disk")}) // returns after the fsync
	b.Close()

	b, err = engine.Open(engine.Options{Dir: dir}) // a restart
	if err != nil {
		panic(err)
	}
	defer b.Close()
	fmt.Println("recovered messages:", b.Recovery().Messages)
	q, _ = b.Queue("orders")
	m, _ := q.ReceiveOne(ctx, 0)
	fmt.Printf("%s\n", m.Body)
	// Output:
	// recovered messages: 1
	// order 1, kept on disk
}

func ExampleBroker_CreateQueue() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()

	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Minute
	cfg.PollingWait = 10 * time.Second // receives wait up to 10 s unless they say otherwise
	fmt.Println(b.CreateQueue("orders", cfg))

	// The same name with the same attributes: nothing to do.
	fmt.Println(b.CreateQueue("orders", cfg))
	// With other attributes: refused.
	_, err := b.CreateQueue("orders", engine.DefaultQueueConfig())
	fmt.Println(errors.Is(err, engine.ErrQueueAlreadyExist))
	// A bad name or attribute.
	_, err = b.CreateQueue("no spaces", cfg)
	fmt.Println(errors.Is(err, engine.ErrInvalidQueueName))
	cfg.VisibilityTimeout = 24 * time.Hour
	_, err = b.CreateQueue("slow", cfg)
	fmt.Println(err)
	// Output:
	// true <nil>
	// false <nil>
	// true
	// true
	// engine: invalid argument: VisibilityTimeout must be between 1 and 43200 seconds
}

func ExampleBroker_Queue() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())

	q, err := b.Queue("orders") // look it up once, keep the *Queue
	fmt.Println(q.Name(), err)
	_, err = b.Queue("invoices")
	fmt.Println(errors.Is(err, engine.ErrQueueNotExist))
	// Output:
	// orders <nil>
	// true
}

func ExampleBroker_SetQueueAttributes() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())

	// Only the fields set in the patch change.
	vt, wait := 2*time.Minute, 20*time.Second
	err := b.SetQueueAttributes("orders", engine.ConfigPatch{VisibilityTimeout: &vt, PollingWait: &wait})
	info, _ := b.GetQueueAttributes("orders")
	fmt.Println(err, info.Config.VisibilityTimeout, info.Config.PollingWait, info.Config.Retention)

	tooBig := 1 << 20
	err = b.SetQueueAttributes("orders", engine.ConfigPatch{MaxMessageBytes: &tooBig})
	fmt.Println(errors.Is(err, engine.ErrInvalidArgument))
	// Output:
	// <nil> 2m0s 20s 96h0m0s
	// true
}

func ExampleBroker_GetQueueAttributes() {
	clk := engine.NewFakeClock(exampleStart)
	b, _ := engine.Open(engine.Options{Clock: clk})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.Send([]engine.SendEntry{
		{Body: []byte("now")},
		{Body: []byte("soon")},
		{Body: []byte("later"), Delay: time.Minute, HasDelay: true},
	}, nil)
	q.ReceiveOne(context.Background(), 0) // one becomes Inactive

	info, err := b.GetQueueAttributes("orders")
	fmt.Println(info.Name, err, info.CreateTime.Format(time.RFC3339))
	fmt.Printf("active %d, inactive %d, delayed %d\n", info.Active, info.Inactive, info.Delayed)
	// Output:
	// orders <nil> 2026-01-02T15:04:05Z
	// active 1, inactive 1, delayed 1
}

func ExampleBroker_DeleteQueue() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(context.Background(), engine.SendEntry{Body: []byte("gone with the queue")})

	fmt.Println(b.DeleteQueue("orders"))
	_, err := b.Queue("orders")
	fmt.Println(errors.Is(err, engine.ErrQueueNotExist))
	fmt.Println(errors.Is(b.DeleteQueue("orders"), engine.ErrQueueNotExist))
	// Output:
	// <nil>
	// true
	// true
}

func ExampleBroker_ListQueues() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	for _, name := range []string{"orders-eu", "orders-us", "orders-asia", "invoices"} {
		b.CreateQueue(name, engine.DefaultQueueConfig())
	}

	// Two at a time, the names that start with "orders-", in byte order.
	marker := ""
	for {
		names, next, err := b.ListQueues("orders-", marker, 2)
		if err != nil {
			panic(err)
		}
		fmt.Println(names)
		if next == "" {
			break
		}
		marker = next
	}
	// Output:
	// [orders-asia orders-eu]
	// [orders-us]
}

func ExampleBroker_Stats() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	ctx := context.Background()
	for _, name := range []string{"orders", "emails"} {
		b.CreateQueue(name, engine.DefaultQueueConfig())
	}
	q, _ := b.Queue("orders")
	q.SendOne(ctx, engine.SendEntry{Body: []byte("a")})
	q.SendOne(ctx, engine.SendEntry{Body: []byte("b")})
	m, _ := q.ReceiveOne(ctx, 0)
	q.DeleteOne(ctx, m.Handle)

	for _, s := range b.Stats().Queues { // by name
		fmt.Printf("%s: active %d, sent %d, received %d, deleted %d\n", s.Name, s.Active, s.Sent, s.Received, s.Deleted)
	}
	// Output:
	// emails: active 0, sent 0, received 0, deleted 0
	// orders: active 1, sent 2, received 1, deleted 1
}

// With SyncNone a send returns before its fsync; Sync makes everything
// sent so far durable, for example at the end of a batch job.
func ExampleBroker_Sync() {
	dir, err := os.MkdirTemp("", "smqd-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	opts := engine.Options{Dir: dir}
	opts.WAL.Sync = engine.SyncNone
	b, err := engine.Open(opts)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	b.CreateQueue("events", engine.DefaultQueueConfig())
	q, _ := b.Queue("events")
	for i := range 3 {
		q.SendOne(context.Background(), engine.SendEntry{Body: fmt.Appendf(nil, "event %d", i)})
	}

	fmt.Println(b.Sync())
	// Output: <nil>
}

func ExampleBroker_Close() {
	b, _ := engine.Open(engine.Options{})
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")

	// A receive waiting for a message (or one that starts later) ends with
	// ErrClosed.
	done := make(chan error)
	go func() {
		_, err := q.ReceiveOne(context.Background(), 30*time.Second)
		done <- err
	}()
	fmt.Println(b.Close())
	fmt.Println(errors.Is(<-done, engine.ErrClosed))
	fmt.Println(errors.Is(b.Close(), engine.ErrClosed)) // closed already
	// Output:
	// <nil>
	// true
	// true
}

func ExampleBroker_Health() {
	b, _ := engine.Open(engine.Options{})
	fmt.Println(b.Health())
	b.Close()
	fmt.Println(b.Health())
	// Output:
	// <nil>
	// engine: broker closed
}

// ReleaseMemory gives memory back after a burst; it loses nothing.
func ExampleBroker_ReleaseMemory() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	for i := range 1000 {
		q.SendOne(context.Background(), engine.SendEntry{Body: fmt.Appendf(nil, "order %d", i)})
	}

	b.ReleaseMemory()
	info, _ := q.Attributes()
	fmt.Println(info.Active)
	// Output: 1000
}

// The replication methods (ApplyCommitted, PersistEntries, SetLeader,
// ReplicaStats...) are for engine/cluster, on a broker it opens with
// Options.Replica. A broker of its own is no replica.
func ExampleBroker_ReplicaStats() {
	b, _ := engine.Open(engine.Options{})
	defer b.Close()

	_, ok := b.ReplicaStats()
	fmt.Println(ok)
	fmt.Println(b.SetLeader(true, 1))
	// Output:
	// false
	// engine: SetLeader on a broker without replication
}

// Recovery says what the last start of a durable broker found in its data
// directory.
func ExampleBroker_Recovery() {
	dir, err := os.MkdirTemp("", "smqd-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	b, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.Send([]engine.SendEntry{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}, nil)
	b.Close()

	b, err = engine.Open(engine.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	rec := b.Recovery()
	fmt.Println(rec.Messages, rec.Lost, rec.Orphans)
	// Output: 3 0 0
}
