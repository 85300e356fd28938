package engine

// FuzzTopicRecords: the decoders of topic, subscription, topic-delete,
// publish and topic-count records (topic_record.go, publish.go) never panic on any payload
// (a record that passed its checksum can still be malformed), whatever they
// accept re-encodes to the same bytes, and folding any of them either works
// or fails with errBadRecord.

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzTopicRecords(f *testing.F) {
	tv := topicVal{id: 3, createMs: 1, modifyMs: 2, cfg: DefaultTopicConfig(), name: "t"}
	sub := &subscription{id: 4, topicID: 3, name: "s", createMs: 5, modifyMs: 6,
		cfg: SubscriptionConfig{Endpoint: "acs:mns:r:a:queues/q", FilterTag: "x", Strategy: BackoffRetry, Format: FormatJSON}}
	f.Add(uint8(0), tv.encode())
	f.Add(uint8(1), encodeSub(sub))
	f.Add(uint8(2), encodeTopicDelete(3, []uint64{4, 5}))
	f.Add(uint8(3), encodePublishHead(3, 7, 8, []msgKey{{1, 2}, {3, 4}}))
	f.Add(uint8(4), countVal{upto: 9, buckets: []countBucket{{5, 2}, {6, 1}}}.encode(3))
	f.Fuzz(func(t *testing.T, kind uint8, in []byte) {
		switch kind % 5 {
		case 0:
			if v, err := decodeTopicVal(in); err == nil {
				if got := v.encode(); !bytes.Equal(got, in[:len(got)]) {
					t.Fatalf("topic value %x re-encodes as %x", in, got)
				}
			}
		case 1:
			if s, err := decodeSub(in); err == nil {
				if got := encodeSub(s); !bytes.Equal(got, in[:len(got)]) {
					t.Fatalf("subscription %x re-encodes as %x", in, got)
				}
			}
		case 2:
			if id, subs, err := decodeTopicDelete(in); err == nil {
				if got := encodeTopicDelete(id, subs); !bytes.Equal(got, in[:len(got)]) {
					t.Fatalf("topic delete %x re-encodes as %x", in, got)
				}
			}
		case 3:
			if keys, err := decodePublishHead(in, nil); err == nil {
				got := encodePublishHead(0, 0, 0, keys)
				if !bytes.Equal(got[publishHeadFixed:], in[publishHeadFixed:]) {
					t.Fatalf("publish header %x re-encodes as %x", in, got)
				}
			}
		case 4:
			if id, v, err := decodeCountVal(in); err == nil {
				if got := v.encode(id); !bytes.Equal(got, in) {
					t.Fatalf("topic counts %x re-encode as %x", in, got)
				}
			}
		}
		typ := []uint8{recTopic, recSubscription, recTopicDelete, recPublish, recTopicCount}[kind%5]
		fd := newFold(0)
		if err := fd.apply(0, uint32(len(in)), typ, in); err != nil && !errors.Is(err, errBadRecord) {
			t.Fatalf("fold: %v", err)
		}
	})
}
