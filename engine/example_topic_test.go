package engine_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/smqd/smqd/engine"
)

// A queue subscription with a FilterTag receives only the messages published
// with that MessageTag; untagged messages and other tags are not delivered
// to it. In the SIMPLIFIED format the queue message's body is the published
// body itself.
func ExampleBroker_Publish() {
	b, err := engine.Open(engine.Options{Clock: engine.NewFakeClock(exampleStart)}) // in memory: no Dir
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.CreateQueue("orders-eu", engine.DefaultQueueConfig()); err != nil {
		panic(err)
	}
	if _, err := b.CreateTopic("orders", engine.DefaultTopicConfig()); err != nil {
		panic(err)
	}
	_, err = b.Subscribe("orders", "eu-only", engine.SubscriptionConfig{
		Endpoint:  "acs:mns:cn-hangzhou:1:queues/orders-eu", // the queue, by name
		FilterTag: "eu",
		Format:    engine.FormatSimplified,
	})
	if err != nil {
		panic(err)
	}

	tagged, _ := b.Publish("orders", engine.PublishInput{Body: []byte("order 1 (eu)"), Tag: "eu"})
	untagged, _ := b.Publish("orders", engine.PublishInput{Body: []byte("order 2 (untagged)")})
	fmt.Println("delivered:", tagged.Delivered, untagged.Delivered)

	q, _ := b.Queue("orders-eu")
	msgs, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("received %q\n", m.Body)
	}
	_, err = q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
	fmt.Println("then empty:", errors.Is(err, engine.ErrMessageNotExist))
	// Output:
	// delivered: 1 0
	// received "order 1 (eu)"
	// then empty: true
}
