package engine

// Golden tests of the topic record formats (topic_record.go, publish.go),
// as format_test.go does for queue and message records: the files under
// testdata/golden never change; a new format is a new record type.

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

func goldenTopicRecords() []goldenRecord {
	tv := topicVal{id: 0x21, createMs: 1_764_590_000_000, modifyMs: 1_764_590_400_000,
		cfg: TopicConfig{MaxMessageBytes: 4096, LoggingEnabled: true}, name: "golden-topic"}
	sub := &subscription{id: 0x22, topicID: 0x21, name: "golden-sub", createMs: 1_764_590_000_000, modifyMs: 1_764_590_400_000,
		cfg: SubscriptionConfig{Endpoint: "acs:mns:cn-hangzhou:127:queues/golden-queue", FilterTag: "tagA",
			Strategy: ExponentialDecayRetry, Format: FormatJSON}}
	return []goldenRecord{
		{"rec32-topic", recTopic, tv.encode()},
		{"rec33-topic-delete", recTopicDelete, encodeTopicDelete(0x21, []uint64{0x22, 0x23})},
		{"rec34-subscription", recSubscription, encodeSub(sub)},
		{"rec35-unsubscribe", recUnsubscribe, encodeID(0x22)},
		{"rec36-publish", recPublish, encodePublishHead(0x21, 7<<bootShift|5, 1_764_590_400_123, []msgKey{{0x11, 0x101}, {0x12, 0x102}})},
		{"rec35-unsubscribe-with-topic", recUnsubscribe, encodeUnsubscribe(0x22, 0x21)},
		{"rec37-topic-count", recTopicCount, countVal{upto: 0x4000, buckets: []countBucket{{5_881_968, 3}, {5_881_969, 1}}}.encode(0x21)},
	}
}

func TestTopicFormatsGolden(t *testing.T) {
	for _, g := range goldenTopicRecords() {
		t.Run(g.name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", g.name+".hex")
			got := hex.Dump(append([]byte{g.typ}, g.data...))
			want, err := os.ReadFile(path)
			if os.IsNotExist(err) && *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Fatalf("%s changed (an on-disk format; never change it):\ngot:\n%swant:\n%s", g.name, got, want)
			}
		})
	}
	// What the golden records hold decodes to the fields encoded.
	recs := goldenTopicRecords()
	if v, err := decodeTopicVal(recs[0].data); err != nil || v.id != 0x21 || v.name != "golden-topic" || v.cfg.MaxMessageBytes != 4096 || !v.cfg.LoggingEnabled {
		t.Errorf("topic: %+v %v", v, err)
	}
	if id, subs, err := decodeTopicDelete(recs[1].data); err != nil || id != 0x21 || len(subs) != 2 || subs[1] != 0x23 {
		t.Errorf("topic delete: %d %v %v", id, subs, err)
	}
	if s, err := decodeSub(recs[2].data); err != nil || s.id != 0x22 || s.topicID != 0x21 || s.name != "golden-sub" || s.cfg.FilterTag != "tagA" ||
		s.cfg.Format != FormatJSON || s.cfg.Strategy != ExponentialDecayRetry || s.kind != endpointQueue || s.queue != "golden-queue" {
		t.Errorf("subscription: %+v %v", s, err)
	}
	if keys, err := decodePublishHead(recs[4].data, nil); err != nil || len(keys) != 2 || keys[1] != (msgKey{0x12, 0x102}) {
		t.Errorf("publish: %v %v", keys, err)
	}
	if id, v, err := decodeCountVal(recs[6].data); err != nil || id != 0x21 || len(v.buckets) != 2 || v.buckets[0] != (countBucket{5_881_968, 3}) {
		t.Errorf("topic counts: %d %+v %v", id, v, err)
	}
}
