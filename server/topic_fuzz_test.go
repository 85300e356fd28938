package server

// FuzzTopicRequests: the topic request decoders (topics.go) never panic on
// any body, answer only the spec's error kinds, and what they accept the
// engine accepts or refuses with its own typed errors (never a panic).

import (
	"errors"
	"testing"

	"github.com/smqd/smqd/engine"
)

func FuzzTopicRequests(f *testing.F) {
	for _, s := range []string{
		`<Topic xmlns="http://mns.aliyuncs.com/doc/v1/"><MaximumMessageSize>1024</MaximumMessageSize><LoggingEnabled>true</LoggingEnabled></Topic>`,
		`<Topic/>`,
		`<Subscription><Endpoint>http://127.0.0.1:9/ep</Endpoint><NotifyStrategy>BACKOFF_RETRY</NotifyStrategy><NotifyContentFormat>JSON</NotifyContentFormat><FilterTag>tagA</FilterTag></Subscription>`,
		`<Subscription><Endpoint>acs:mns:cn-hangzhou:127:queues/q</Endpoint><FilterTag /></Subscription>`,
		`<Message><MessageBody>aGVsbG8g5LiW55WM</MessageBody><MessageTag>tagA</MessageTag></Message>`,
		`<?xml version="1.0" encoding="UTF-8"?><Message xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageBody>x</MessageBody><MessageAttributes><DirectSMS>{"a":1}</DirectSMS></MessageAttributes></Message>`,
		`<Message><MessageBody><b/></MessageBody></Message>`,
	} {
		f.Add([]byte(s))
	}
	b, err := engine.Open(engine.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	if _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); err != nil {
		f.Fatal(err)
	}
	if _, err := b.CreateTopic("t", engine.DefaultTopicConfig()); err != nil {
		f.Fatal(err)
	}
	known := func(t *testing.T, err error) {
		if err == nil {
			return
		}
		if _, _, ok := classify(err); !ok {
			t.Fatalf("an error the table does not know: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d xmlDoc
		if p, err := decodeTopicAttrs(&d, in); err == nil {
			err = b.SetTopicAttributes("t", p)
			known(t, err)
			if err == nil && p.MaxMessageBytes != nil && (*p.MaxMessageBytes < engine.MinMessageBytes || *p.MaxMessageBytes > engine.MaxMessageBytes) {
				t.Fatalf("accepted MaximumMessageSize %d", *p.MaxMessageBytes)
			}
		} else {
			known(t, err)
		}
		if sd, err := decodeSubscription(&d, in, false); err == nil {
			_, err = b.Subscribe("t", "s", sd.cfg)
			known(t, err)
			if err == nil {
				if err := b.Unsubscribe("t", "s"); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			known(t, err)
		}
		var props []engine.Property
		if p, err := decodePublish(&d, in, &props); err == nil {
			_, err = b.Publish("t", p)
			known(t, err)
			if len(p.Body) == 0 {
				t.Fatal("accepted an empty MessageBody")
			}
		} else {
			known(t, err)
			var se *xmlSyntaxError
			var ae *engine.ArgumentError
			if !errors.As(err, &se) && !errors.As(err, &ae) {
				t.Fatalf("publish decode error %T: %v", err, err)
			}
		}
	})
}
