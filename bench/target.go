package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outgoing is one message to send.
type Outgoing struct {
	Body     []byte
	Priority int // 1..16; 0 means the broker's default
	Delay    int // seconds; 0 means none
}

// Target is a system under test: smqd over HTTP, the engine in process, or
// a peer broker (Peer). The workload code drives every target the same way.
type Target interface {
	// Name is the target's short name ("smqd", "inproc", "redis", ...).
	Name() string
	// Prepare makes the queues exist; with fresh it first removes what an
	// earlier run left (or uses names that cannot collide). Clients made
	// afterwards address the queues by their index in names.
	Prepare(ctx context.Context, names []string, fresh bool) error
	// NewClient returns a client for one worker.
	NewClient(ctx context.Context) (Client, error)
	// Backlog returns the messages queue i holds that are not deleted:
	// visible, in flight (received, not deleted) and delayed.
	Backlog(ctx context.Context, i int) (int64, error)
	// Close releases the target (connections, an in-process broker).
	Close() error
}

// Client is one worker's connection. It is not safe for concurrent use.
//
// A consumer receives from one queue at a time; what it receives becomes
// pending until Delete deletes it (oldest first).
type Client interface {
	// Send sends a batch of 1..16 messages to queue i and returns how many
	// were stored.
	Send(ctx context.Context, i int, msgs []Outgoing) (int, error)
	// Receive takes up to max messages from queue i, waiting up to wait for
	// the first; fn sees each body (valid only during the call). It returns
	// 0 and no error when nothing came.
	Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error)
	// Delete deletes up to n pending messages (oldest first) and returns how
	// many were deleted; failed ones are dropped from pending and reported
	// in the error.
	Delete(ctx context.Context, n int) (int, error)
	// Pending returns the number of received, not yet deleted messages.
	Pending() int
	// Close closes the client's connections.
	Close() error
}

// Peer is a broker other than smqd that the bench can drive, as the
// command line sees it: a --target name and a constructor. The peers' clients
// live in their own module (bench/peers), so that smqd's module, and every
// module that embeds engine, needs none of their client libraries; that
// module's smqbench passes its peers to cmd/smqbench/cli.Run.
type Peer struct {
	Name        string // the --target value, e.g. "redis"
	DefaultAddr string // the address when --addr is not given
	// New returns a target for the peer. It may connect lazily (in
	// Target.Prepare).
	New func(o PeerOptions) (Target, error)
}

// PeerOptions is what a run tells a Peer's constructor.
type PeerOptions struct {
	Addr    string // --addr, or the peer's DefaultAddr
	Workers int    // producers plus consumers: the clients the run makes
	// VisibilityTimeout is how long a received message stays hidden before
	// the peer may deliver it again (beanstalkd's ttr, JetStream's ack wait).
	VisibilityTimeout time.Duration
}

// ErrUnsupported is returned by a target asked for a feature it lacks
// (priorities or delays on a peer without them).
var ErrUnsupported = errors.New("bench: not supported by this target")

// PartialError reports a batch whose entries partly failed.
type PartialError struct {
	Failed int
	Code   string
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("bench: %d entries failed (%s)", e.Failed, e.Code)
}
