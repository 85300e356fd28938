package index

import (
	"fmt"
	"testing"
)

// Topics and subscriptions: put, overwrite, delete, and scans in id order
// that survive a reopen (the 't', 'u' and 'c' key spaces of doc.go).
func TestTopicsAndSubscriptions(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	b := s.NewBatch()
	b.PutTopic(2, []byte("t2"))
	b.PutTopic(1, []byte("t1"))
	b.PutTopic(3, []byte("t3"))
	b.PutSubscription(7, []byte("s7"))
	b.PutSubscription(5, []byte("s5"))
	b.PutTopicCount(2, []byte("c2"))
	b.PutTopicCount(3, []byte("c3"))
	b.PutQueue(1, []byte("q1")) // another key space: not a topic
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	b.DeleteTopic(3)
	b.PutTopic(2, []byte("t2'"))
	b.DeleteSubscription(5)
	b.DeleteSubscription(99) // absent: not an error
	b.DeleteTopicCount(3)
	b.DeleteTopicCount(98) // absent: not an error
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, Options{})
	defer s.Close()
	var got []string
	if err := s.Topics(func(id uint64, v []byte) error {
		got = append(got, fmt.Sprintf("%d=%s", id, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Subscriptions(func(id uint64, v []byte) error {
		got = append(got, fmt.Sprintf("s%d=%s", id, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.TopicCounts(func(id uint64, v []byte) error {
		got = append(got, fmt.Sprintf("c%d=%s", id, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]string{2: "c2", 3: ""} {
		if v, err := s.TopicCount(id); err != nil || string(v) != want || (want == "") != (v == nil) {
			t.Fatalf("TopicCount(%d) = %q, %v", id, v, err)
		}
	}
	if fmt.Sprint(got) != "[1=t1 2=t2' s7=s7 c2=c2]" {
		t.Fatalf("got %v", got)
	}
	if k, ok := parseIDKey(appendIDKey(nil, prefixTopic, 9), prefixSub); ok {
		t.Fatalf("a topic key parsed as a subscription key: %d", k)
	}
}

// HasQueue: a committed PutQueue is there, a DeleteQueue takes it away, a
// queue never put is absent, and a topic of the same id is not a queue.
func TestHasQueue(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	b := s.NewBatch()
	b.PutQueue(1, []byte("q1"))
	b.PutQueue(2, []byte("q2"))
	b.PutTopic(3, []byte("t3"))
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	b.DeleteQueue(2)
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]bool{1: true, 2: false, 3: false, 4: false} {
		if got, err := s.HasQueue(id); err != nil || got != want {
			t.Errorf("HasQueue(%d) = %v, %v; want %v", id, got, err, want)
		}
	}
	s.Close()
	if _, err := s.HasQueue(1); err == nil {
		t.Error("HasQueue on a closed store: no error")
	}
}
