package engine

import (
	"time"
)

// Limits of the queue API (spec §4, §6). Durations are whole seconds on the
// wire; the engine accepts any duration within the range.
const (
	MaxDelay             = 7 * 24 * time.Hour // DelaySeconds 0..604800
	MinMessageBytes      = 1024               // MaximumMessageSize lower bound
	MaxMessageBytes      = 65536              // MaximumMessageSize upper bound
	MinRetention         = 60 * time.Second   // MessageRetentionPeriod 60..604800
	MaxRetention         = 7 * 24 * time.Hour //
	MaxMaxReceiveCount   = 1000               // a dead-letter policy's MaxReceiveCount 1..1000
	MinVisibilityTimeout = time.Second        // VisibilityTimeout 1..43200
	MaxVisibilityTimeout = 12 * time.Hour     //
	MaxPollingWait       = 30 * time.Second   // PollingWaitSeconds / waitseconds 0..30
	MaxBatch             = 16                 // entries per send, receive, peek, delete batch
	MaxBatchBodyBytes    = 65536              // total body bytes of one batch send
	MinPriority          = 1                  // highest priority
	MaxPriority          = 16                 // lowest priority
	DefaultPriority      = 8                  //
	MaxQueueNameLen      = 256                //
)

// QueueConfig holds a queue's settable attributes. Start from
// DefaultQueueConfig: a zero QueueConfig is refused (its MaxMessageBytes
// and VisibilityTimeout are out of range).
type QueueConfig struct {
	Delay             time.Duration // default delay of a message sent without its own
	MaxMessageBytes   int           // largest body a send may give, in bytes (a topic's deliveries are not held to it: Subscribe checks the topic's limit against it, and the notification's envelope adds to the body)
	Retention         time.Duration // a message expires this long after it was sent
	VisibilityTimeout time.Duration // how long a received message stays Inactive
	PollingWait       time.Duration // default long-poll wait of a receive without its own
	LoggingEnabled    bool          // accepted and stored; has no effect
	// DeadLetterQueue and MaxReceiveCount are the dead-letter policy
	// (deadletter.go): a message received MaxReceiveCount times moves to
	// the queue named DeadLetterQueue (of the same broker) instead of being
	// received again. "" (and 0) means no policy.
	DeadLetterQueue string
	MaxReceiveCount int // 1..MaxMaxReceiveCount with a DeadLetterQueue, else 0
}

// DefaultQueueConfig returns the attributes of a queue created without any
// (spec §3.2): no delay, 64 KiB bodies, 4 days retention, 30 s visibility
// timeout, no long polling, logging off.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		Delay:             0,
		MaxMessageBytes:   MaxMessageBytes,
		Retention:         345600 * time.Second,
		VisibilityTimeout: 30 * time.Second,
		PollingWait:       0,
	}
}

// Validate checks every attribute against the spec's ranges.
func (c QueueConfig) Validate() error {
	if err := checkDuration("DelaySeconds", c.Delay, 0, MaxDelay); err != nil {
		return err
	}
	if c.MaxMessageBytes < MinMessageBytes || c.MaxMessageBytes > MaxMessageBytes {
		return rangeErr("MaximumMessageSize", MinMessageBytes, MaxMessageBytes, "bytes")
	}
	if err := checkDuration("MessageRetentionPeriod", c.Retention, MinRetention, MaxRetention); err != nil {
		return err
	}
	if err := checkDuration("VisibilityTimeout", c.VisibilityTimeout, MinVisibilityTimeout, MaxVisibilityTimeout); err != nil {
		return err
	}
	if err := checkDuration("PollingWaitSeconds", c.PollingWait, 0, MaxPollingWait); err != nil {
		return err
	}
	if c.DeadLetterQueue == "" {
		if c.MaxReceiveCount != 0 {
			return argErr("MaxReceiveCount", "needs a DeadLetterTargetQueue")
		}
		return nil
	}
	if err := ValidateQueueName(c.DeadLetterQueue); err != nil {
		return argErr("DeadLetterTargetQueue", "is not a valid queue name: %v", err)
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > MaxMaxReceiveCount {
		return rangeErr("MaxReceiveCount", 1, MaxMaxReceiveCount, "")
	}
	return nil
}

func checkDuration(field string, d, min, max time.Duration) error {
	if d < min || d > max {
		return rangeErr(field, int64(min/time.Second), int64(max/time.Second), "seconds")
	}
	return nil
}

// ConfigPatch names the attributes a SetQueueAttributes call changes; nil
// fields stay as they are.
type ConfigPatch struct {
	Delay             *time.Duration
	MaxMessageBytes   *int
	Retention         *time.Duration
	VisibilityTimeout *time.Duration
	PollingWait       *time.Duration
	LoggingEnabled    *bool
	// DeadLetterQueue set to "" turns the dead-letter policy off (and
	// clears MaxReceiveCount).
	DeadLetterQueue *string
	MaxReceiveCount *int
}

// Apply returns c with the patch's fields set.
func (p ConfigPatch) Apply(c QueueConfig) QueueConfig {
	if p.Delay != nil {
		c.Delay = *p.Delay
	}
	if p.MaxMessageBytes != nil {
		c.MaxMessageBytes = *p.MaxMessageBytes
	}
	if p.Retention != nil {
		c.Retention = *p.Retention
	}
	if p.VisibilityTimeout != nil {
		c.VisibilityTimeout = *p.VisibilityTimeout
	}
	if p.PollingWait != nil {
		c.PollingWait = *p.PollingWait
	}
	if p.LoggingEnabled != nil {
		c.LoggingEnabled = *p.LoggingEnabled
	}
	if p.DeadLetterQueue != nil {
		c.DeadLetterQueue = *p.DeadLetterQueue
		if c.DeadLetterQueue == "" {
			c.MaxReceiveCount = 0
		}
	}
	if p.MaxReceiveCount != nil {
		c.MaxReceiveCount = *p.MaxReceiveCount
	}
	return c
}

// QueueInfo is a snapshot of a queue's attributes and message counts.
// The counts are exact at the moment of the call.
type QueueInfo struct {
	Name           string
	Config         QueueConfig
	CreateTime     time.Time
	LastModifyTime time.Time
	Active         int64 // visible now
	Inactive       int64 // received, not yet visible again
	Delayed        int64 // delayed, not yet visible
}

// ValidateQueueName checks a queue name: 1..256 bytes of [A-Za-z0-9-], not
// starting with '-'.
func ValidateQueueName(name string) error {
	if len(name) < 1 || len(name) > MaxQueueNameLen {
		return ErrQueueNameLength
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return ErrInvalidQueueName
		}
	}
	return nil
}

// inMs returns c with its durations truncated to whole milliseconds: the
// precision the engine works in and the queue record stores, so that the
// attributes a queue answers with, and CreateQueue's "same attributes",
// do not change across a restart.
func (c QueueConfig) inMs() QueueConfig {
	c.Delay = c.Delay.Truncate(time.Millisecond)
	c.Retention = c.Retention.Truncate(time.Millisecond)
	c.VisibilityTimeout = c.VisibilityTimeout.Truncate(time.Millisecond)
	c.PollingWait = c.PollingWait.Truncate(time.Millisecond)
	return c
}
