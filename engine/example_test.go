package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/smqd/smqd/engine"
)

// Example shows the batch forms (Send, Receive, Delete), which README.md
// "Embedding" calls the primary API; its example is Example_oneMessage.
func Example() {
	b, err := engine.Open(engine.Options{}) // Options{Dir: "data"} for a durable broker
	if err != nil {
		panic(err)
	}
	defer b.Close()
	b.CreateQueue("orders", engine.DefaultQueueConfig())
	q, _ := b.Queue("orders")
	q.Send([]engine.SendEntry{{Body: []byte("low")}, {Body: []byte("urgent"), Priority: 1}}, nil)

	msgs, _ := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, Wait: 5 * time.Second, HasWait: true}, nil)
	handles := make([]engine.ReceiptHandle, len(msgs))
	for i, m := range msgs {
		fmt.Printf("%s (priority %d)\n", m.Body, m.Priority)
		handles[i] = m.Handle
	}
	q.Delete(handles, make([]error, len(handles)))
	// Output:
	// urgent (priority 1)
	// low (priority 8)
}
