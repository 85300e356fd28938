package engine

import (
	"sync"
	"testing"
	"time"
)

// Publish while a subscribed queue is deleted and made again, and while an
// HTTP subscription (its push queue) comes and goes: a publish whose
// target's queue was deleted between reserving its slot and encoding its
// record skips it (embedding audit, 2026-12-06: Publish panicked with an
// index out of range there, holding the stripe's lock, in 3 of 3 runs
// within 2 s). Bounded in count and time.
func TestPublishWhileItsQueuesGo(t *testing.T) {
	for _, name := range []string{"memory", "durable"} {
		t.Run(name, func(t *testing.T) {
			o := Options{Push: PushOptions{Disabled: true}, Logger: testLogger(t)}
			if name == "durable" {
				o.Dir = t.TempDir()
			}
			b, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
				t.Fatal(err)
			}
			mustQueue(t, b, "q", DefaultQueueConfig())
			if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: qEndpoint("q")}); err != nil {
				t.Fatal(err)
			}
			stop := time.Now().Add(2 * time.Second)
			var wg sync.WaitGroup
			wg.Add(3)
			go func() {
				defer wg.Done()
				for i := 0; i < 20000 && time.Now().Before(stop); i++ {
					b.Publish("t", PublishInput{Body: []byte("hello")})
				}
			}()
			go func() {
				defer wg.Done()
				for i := 0; i < 2000 && time.Now().Before(stop); i++ {
					b.DeleteQueue("q")
					b.CreateQueue("q", DefaultQueueConfig())
				}
			}()
			go func() {
				defer wg.Done()
				for i := 0; i < 2000 && time.Now().Before(stop); i++ {
					b.Subscribe("t", "h", SubscriptionConfig{Endpoint: "http://127.0.0.1:9/x"})
					b.Unsubscribe("t", "h")
				}
			}()
			wg.Wait()
		})
	}
}
