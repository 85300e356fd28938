package engine_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Example_oneMessage is the embedding example of README.md: one message
// at a time, with the one-message helpers.
func Example_oneMessage() {
	ctx := context.Background()
	b, err := engine.Open(engine.Options{}) // Options{Dir: "data"} for a durable broker
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateQueue("jobs", engine.DefaultQueueConfig()); err != nil {
		log.Fatal(err) // an existing queue of the same attributes is no error
	}
	q, err := b.Queue("jobs")
	if err != nil {
		log.Fatal(err)
	}

	if _, err := q.SendOne(ctx, engine.SendEntry{Body: []byte("resize photo 42")}); err != nil {
		log.Fatal(err) // ErrDiskFull, ErrStorageUnavailable: retry later
	}
	m, err := q.ReceiveOne(ctx, 5*time.Second) // waits up to 5 s for a message
	switch {
	case errors.Is(err, engine.ErrMessageNotExist), errors.Is(err, engine.ErrTooManyLongPolls):
		// nothing yet (or too many receives wait already): poll again
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s\n", m.Body)
		// Done with it. If this fails (the visibility timeout ended first),
		// the message comes back: at least once.
		if err := q.DeleteOne(ctx, m.Handle); err != nil {
			log.Print(err)
		}
	}
	// Output: resize photo 42
}

func ExampleQueue_SendOne() {
	ctx := context.Background()
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")

	res, err := q.SendOne(ctx, engine.SendEntry{Body: []byte("order 1"), Priority: 1, Delay: 0, HasDelay: true})
	fmt.Println(err, len(res.ID.String()))
	// Output: <nil> 32
}

func ExampleQueue_ReceiveOne() {
	ctx := context.Background()
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")

	_, err := q.ReceiveOne(ctx, 0) // empty, and no wait
	fmt.Println(errors.Is(err, engine.ErrMessageNotExist))

	q.SendOne(ctx, engine.SendEntry{Body: []byte("order 2")})
	m, _ := q.ReceiveOne(ctx, time.Second)
	fmt.Printf("%s, received %d time(s)\n", m.Body, m.DequeueCount)
	// Output:
	// true
	// order 2, received 1 time(s)
}

func ExampleQueue_DeleteOne() {
	ctx := context.Background()
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(ctx, engine.SendEntry{Body: []byte("order 3")})
	m, _ := q.ReceiveOne(ctx, 0)

	fmt.Println(q.DeleteOne(ctx, m.Handle))
	fmt.Println(errors.Is(q.DeleteOne(ctx, m.Handle), engine.ErrMessageNotExist)) // a handle works once
	// Output:
	// <nil>
	// true
}

func ExampleQueue_ChangeVisibilityOne() {
	ctx := context.Background()
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(ctx, engine.SendEntry{Body: []byte("order 4")})
	m, _ := q.ReceiveOne(ctx, 0)

	// Needs more time: keep it invisible for another minute.
	h, err := q.ChangeVisibilityOne(ctx, m.Handle, time.Minute)
	fmt.Println(err)
	fmt.Println(errors.Is(q.DeleteOne(ctx, m.Handle), engine.ErrMessageNotExist)) // the old handle died
	fmt.Println(q.DeleteOne(ctx, h))
	// Output:
	// <nil>
	// true
	// <nil>
}

func ExampleQueue_Extend() {
	ctx := context.Background()
	b, _ := engine.Open(engine.Options{})
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.SendOne(ctx, engine.SendEntry{Body: []byte("order 5")})
	m, _ := q.ReceiveOne(ctx, 0)

	// A long job: keep the message invisible while working on it. Extend
	// updates m.Handle in place, so the Ack below uses the live handle.
	fmt.Println(q.Extend(ctx, &m, time.Minute))
	fmt.Println(q.Extend(ctx, &m, time.Minute))
	fmt.Println(q.Ack(ctx, &m))
	// Output:
	// <nil>
	// <nil>
	// <nil>
}

// The helpers honour an ended context before doing anything, and a
// context that ends while a receive waits.
func TestOneContext(t *testing.T) {
	b, err := engine.Open(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.CreateQueue("q", engine.DefaultQueueConfig())
	q, _ := b.Queue("q")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.SendOne(done, engine.SendEntry{Body: []byte("x")}); !errors.Is(err, context.Canceled) {
		t.Errorf("SendOne on a cancelled context: %v", err)
	}
	if info, _ := q.Attributes(); info.Active != 0 {
		t.Errorf("a cancelled SendOne sent: %+v", info)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := q.ReceiveOne(ctx, 30*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReceiveOne past its context: %v", err)
	}
	// A cancellable context that does not end: the wait path.
	live, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	res, err := q.SendOne(live, engine.SendEntry{Body: []byte("y")})
	if err != nil || res.ID == (engine.MessageID{}) {
		t.Fatalf("SendOne: %v %v", res, err)
	}
	m, err := q.ReceiveOne(live, 0)
	if err != nil || string(m.Body) != "y" {
		t.Fatalf("ReceiveOne: %v %q", err, m.Body)
	}
	h, err := q.ChangeVisibilityOne(live, m.Handle, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.DeleteOne(live, h); err != nil {
		t.Fatal(err)
	}
	if err := q.DeleteOne(live, engine.ReceiptHandle{}); err == nil {
		t.Error("DeleteOne of a zero handle succeeded")
	}
	if _, err := q.SendOne(live, engine.SendEntry{}); err == nil {
		t.Error("SendOne of an empty body succeeded")
	}
}

// A SendOne whose context ends first may still store its message (the
// log cannot take it back), but what it stores is what the caller gave:
// the caller may reuse its buffers once SendOne returns. (The send read
// the caller's body after SendOne had returned ctx.Err(): a reused buffer
// was stored instead, some with another body's MD5, and the race detector
// flagged it.)
func TestSendOneOwnsItsBodyWhenItsContextEnds(t *testing.T) {
	b, err := engine.Open(engine.Options{Dir: t.TempDir()}) // durable: each send waits for its fsync
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.CreateQueue("q", engine.DefaultQueueConfig())
	q, _ := b.Queue("q")
	body := bytes.Repeat([]byte("a"), 32<<10)
	name, value := []byte("k"), []byte("v")
	ended := 0
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Microsecond)
		_, err := q.SendOne(ctx, engine.SendEntry{Body: body, Properties: []engine.Property{{Name: name, Value: value, Type: engine.PropString}}})
		cancel()
		if err != nil {
			ended++
			for i := range body {
				body[i] = 'b' // the call returned: the buffers are the caller's again
			}
			value[0] = 'w'
		}
		for i := range body {
			body[i] = 'a'
		}
		value[0] = 'v'
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 100 sends returned before their message was stored", ended)
	for {
		ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16}, nil)
		if err != nil || len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if !bytes.Equal(m.Body, bytes.Repeat([]byte("a"), 32<<10)) || m.MD5 != md5.Sum(m.Body) ||
				len(m.Properties) != 1 || string(m.Properties[0].Value) != "v" {
				t.Fatalf("a stored message is not what was sent: body %q..., MD5 matches %v, properties %+v",
					m.Body[:8], m.MD5 == md5.Sum(m.Body), m.Properties)
			}
		}
	}
}
