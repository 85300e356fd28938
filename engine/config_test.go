package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQueueConfigValidate(t *testing.T) {
	ok := DefaultQueueConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		mod   func(*QueueConfig)
		field string
	}{
		{"delay negative", func(c *QueueConfig) { c.Delay = -time.Second }, "DelaySeconds"},
		{"delay over 7d", func(c *QueueConfig) { c.Delay = MaxDelay + time.Second }, "DelaySeconds"},
		{"size under", func(c *QueueConfig) { c.MaxMessageBytes = 1023 }, "MaximumMessageSize"},
		{"size over", func(c *QueueConfig) { c.MaxMessageBytes = 65537 }, "MaximumMessageSize"},
		{"retention under", func(c *QueueConfig) { c.Retention = 59 * time.Second }, "MessageRetentionPeriod"},
		{"retention over", func(c *QueueConfig) { c.Retention = MaxRetention + time.Second }, "MessageRetentionPeriod"},
		{"visibility 0", func(c *QueueConfig) { c.VisibilityTimeout = 0 }, "VisibilityTimeout"},
		{"visibility over", func(c *QueueConfig) { c.VisibilityTimeout = 43201 * time.Second }, "VisibilityTimeout"},
		{"polling over", func(c *QueueConfig) { c.PollingWait = 31 * time.Second }, "PollingWaitSeconds"},
	}
	for _, c := range cases {
		cfg := ok
		c.mod(&cfg)
		err := cfg.Validate()
		var ae *ArgumentError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &ae) || ae.Field != c.field || !strings.Contains(err.Error(), "between") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	edges := ok
	edges.Delay, edges.MaxMessageBytes, edges.Retention, edges.VisibilityTimeout, edges.PollingWait =
		MaxDelay, MinMessageBytes, MinRetention, MaxVisibilityTimeout, MaxPollingWait
	if err := edges.Validate(); err != nil {
		t.Fatalf("edges: %v", err)
	}
}

func TestQueueNames(t *testing.T) {
	for _, n := range []string{"a", "A", "0", "q-1", "Orders-2026", strings.Repeat("x", 256)} {
		if err := ValidateQueueName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for n, want := range map[string]error{
		"": ErrQueueNameLength, strings.Repeat("x", 257): ErrQueueNameLength,
		"-a": ErrInvalidQueueName, "a_b": ErrInvalidQueueName, "a.b": ErrInvalidQueueName, "a b": ErrInvalidQueueName, "é": ErrInvalidQueueName,
	} {
		if err := ValidateQueueName(n); err != want {
			t.Errorf("%q: %v want %v", n, err, want)
		}
	}
}

func TestCreateQueueSemantics(t *testing.T) {
	b, clk := openTest(t, Options{})
	cfg := DefaultQueueConfig()
	if created, err := b.CreateQueue("q", cfg); !created || err != nil {
		t.Fatal(created, err)
	}
	if created, err := b.CreateQueue("q", cfg); created || err != nil {
		t.Fatalf("same attributes: %v %v", created, err)
	}
	cfg2 := cfg
	cfg2.VisibilityTimeout = time.Minute
	if _, err := b.CreateQueue("q", cfg2); !errors.Is(err, ErrQueueAlreadyExist) {
		t.Fatalf("different attributes: %v", err)
	}
	bad := cfg
	bad.MaxMessageBytes = 10
	if _, err := b.CreateQueue("q2", bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := b.Queue("q2"); !errors.Is(err, ErrQueueNotExist) {
		t.Fatal("invalid create changed something")
	}
	clk.Advance(90 * time.Second)
	v := 2 * time.Minute
	if err := b.SetQueueAttributes("q", ConfigPatch{VisibilityTimeout: &v}); err != nil {
		t.Fatal(err)
	}
	info, _ := b.GetQueueAttributes("q")
	if info.Config.VisibilityTimeout != v || info.LastModifyTime.Unix() != t0.Add(90*time.Second).Unix() || info.CreateTime.Unix() != t0.Unix() {
		t.Fatalf("%+v", info)
	}
	big := 70000
	if err := b.SetQueueAttributes("q", ConfigPatch{MaxMessageBytes: &big}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if info2, _ := b.GetQueueAttributes("q"); info2.Config != info.Config {
		t.Fatal("invalid set changed attributes")
	}
	if err := b.SetQueueAttributes("nope", ConfigPatch{}); !errors.Is(err, ErrQueueNotExist) {
		t.Fatal(err)
	}
}

func TestListQueuesPaging(t *testing.T) {
	b, _ := openTest(t, Options{})
	for _, n := range []string{"b", "a1", "a2", "a3", "c"} {
		mustQueue(t, b, n, DefaultQueueConfig())
	}
	names, next, err := b.ListQueues("", "", 2)
	if err != nil || strings.Join(names, ",") != "a1,a2" || next != "a3" {
		t.Fatalf("%v %q %v", names, next, err)
	}
	names, next, _ = b.ListQueues("", next, 2)
	if strings.Join(names, ",") != "a3,b" || next != "c" {
		t.Fatalf("%v %q", names, next)
	}
	names, next, _ = b.ListQueues("", next, 2)
	if strings.Join(names, ",") != "c" || next != "" {
		t.Fatalf("%v %q", names, next)
	}
	names, next, _ = b.ListQueues("a", "", 0)
	if strings.Join(names, ",") != "a1,a2,a3" || next != "" {
		t.Fatalf("prefix: %v %q", names, next)
	}
	if _, _, err := b.ListQueues("", "", 1001); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}
