package engine

import (
	"encoding/binary"
	"encoding/json"
	"time"
)

// MessageState is the state of a message (DESIGN.md "Message model").
type MessageState uint8

// Message states. Deleted and Expired are terminal: the broker forgets the
// message and its slot is reused.
const (
	Delayed MessageState = iota + 1
	Active
	Inactive
	Deleted
	Expired
)

func (s MessageState) String() string {
	switch s {
	case Delayed:
		return "Delayed"
	case Active:
		return "Active"
	case Inactive:
		return "Inactive"
	case Deleted:
		return "Deleted"
	case Expired:
		return "Expired"
	}
	return "Unknown"
}

// MessageID identifies a message uniquely within its queue, forever: the
// queue's broker-unique id (with the broker's Options.MessageIDSpace in
// bits 48-62, so that a cluster's shards never share one) followed by the
// message's sequence number.
type MessageID [16]byte

// messageID is the id of message seq of queue qid: its queue half carries
// the broker's MessageIDSpace (Options) in bits 48-62, so that the brokers
// of a cluster's shards, whose queue ids each count from 1, never give two
// messages one id.
func (b *Broker) messageID(qid, seq uint64) MessageID {
	return makeMessageID(qid|b.idSpace, seq)
}

// messageID is the id of q's message seq.
func (q *Queue) messageID(seq uint64) MessageID { return q.b.messageID(q.id, seq) }

func makeMessageID(queueID, seq uint64) MessageID {
	var id MessageID
	binary.BigEndian.PutUint64(id[0:8], queueID)
	binary.BigEndian.PutUint64(id[8:16], seq)
	return id
}

const upperHex = "0123456789ABCDEF"

// AppendText appends the 32 upper-case hex digits of the id.
func (id MessageID) AppendText(b []byte) []byte {
	for _, c := range id {
		b = append(b, upperHex[c>>4], upperHex[c&15])
	}
	return b
}

func (id MessageID) String() string { return string(id.AppendText(make([]byte, 0, 32))) }

// MarshalText is the id's 32 hex digits (encoding.TextMarshaler: JSON and
// the like write it as a string, not 16 numbers).
func (id MessageID) MarshalText() ([]byte, error) { return id.AppendText(make([]byte, 0, 32)), nil }

// UnmarshalJSON reads the id as MarshalText writes it, or as the array of
// 16 numbers that versions before MarshalText wrote (JSON an embedder
// kept then still loads: review). An array of another length is refused
// (it was zero-filled or cut to 16), and null leaves the id as it is, as
// encoding/json does for ReceiptHandle (embedding audit 3).
func (id *MessageID) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) > 0 && data[0] == '[' {
		var a []byte
		if err := json.Unmarshal(data, &a); err != nil {
			return err
		}
		if len(a) != len(id) {
			return argErr("MessageId", "is 16 numbers, not %d", len(a))
		}
		*id = MessageID(a)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	return id.UnmarshalText([]byte(s))
}

// UnmarshalText parses 32 hex digits (either case).
func (id *MessageID) UnmarshalText(text []byte) error {
	p, err := ParseMessageID(text)
	if err == nil {
		*id = p
	}
	return err
}

// ParseMessageID parses the 32 hex digits of a MessageId (either case).
func ParseMessageID(text []byte) (MessageID, error) {
	var id MessageID
	if !unhexInto(id[:], text) {
		return MessageID{}, argErr("MessageId", "is 32 hex digits")
	}
	return id, nil
}

// MD5Hex appends the upper-case hex form of a body MD5 (MessageBodyMD5).
func MD5Hex(b []byte, sum [16]byte) []byte {
	for _, c := range sum {
		b = append(b, upperHex[c>>4], upperHex[c&15])
	}
	return b
}

// SendEntry is one message of a Send batch.
//
// The engine stores any bytes. A queue that is also served over the wire
// API (server.New on the same broker) hands its messages out as XML text:
// a body, or a property name or value, that is not UTF-8 or holds control
// characters other than tab, LF and CR makes every ReceiveMessage and
// PeekMessage answer that carries it a document no XML parser takes (its
// client cannot read the receipt handle, so the message comes back until
// it expires or is dead-lettered). Encode binary data (base64, as the MNS
// SDKs do) for such a queue; the server refuses such text at its own sends.
type SendEntry struct {
	Body     []byte        // 1..MaximumMessageSize bytes; copied
	Priority int           // 1 (highest) .. 16; 0 means the default, 8
	Delay    time.Duration // the message's own delay, used when HasDelay (set without it: an *ArgumentError)
	HasDelay bool          // false: the queue's DelaySeconds applies
	// Properties are the message's user and system properties (props.go);
	// copied. They are stored and returned with the message.
	Properties []Property
}

// SendResult is the outcome of one SendEntry.
type SendResult struct {
	ID  MessageID
	MD5 [16]byte // MD5 of the body as stored
	// Handle is set for a message that starts Delayed: it works with
	// Delete and ChangeVisibility until the message becomes visible (the
	// first receive, or a visibility change, replaces it; handle.go).
	Handle ReceiptHandle
	// Err is nil for every entry Send returns: a storage failure fails
	// the whole call instead (the entries before it in out are stored).
	// Kept for callers written against per-entry results.
	Err error
}

// ReceiveOptions controls Receive.
type ReceiveOptions struct {
	Max     int           // messages wanted, 1..16; 0 means 1
	Wait    time.Duration // long-poll wait, used when HasWait; 0..30 s (set without it: an *ArgumentError)
	HasWait bool          // false: the queue's PollingWaitSeconds applies
	// MaxWait, if positive, caps the effective wait (Wait, or the queue's
	// PollingWaitSeconds): a server answers an empty full-length poll a
	// little early, inside the clients' own timeouts (server/handlers_message.go).
	MaxWait time.Duration
}

// Message is a received or peeked message. Receive and Peek reuse the Body
// slice of the destination element when it has room.
type Message struct {
	ID               MessageID
	Handle           ReceiptHandle // zero for Peek
	Body             []byte
	MD5              [16]byte
	EnqueueTime      time.Time
	FirstDequeueTime time.Time // equals EnqueueTime before the first receive
	NextVisibleTime  time.Time // receive: when the message becomes visible again
	DequeueCount     int
	Priority         int
	// Properties are the message's user and system properties as sent
	// (props.go), plus the dead-letter ones after a move (deadletter.go).
	// Their bytes alias props.
	Properties []Property
	props      []byte // the encoded properties block, reused like Body
}
