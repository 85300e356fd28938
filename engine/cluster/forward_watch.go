package cluster

// The context of a forwarded request on the leader (serveForward). It ends
// when the forwarding node closes the connection, which it does when it
// stops waiting for the answer (its shutdown cuts its forwarded long polls
// short), or when the base context the server gave ends. A long poll
// waiting on it then ends without taking a message that nobody would
// receive (it would be invisible until its visibility timeout).
//
// Watching a connection takes a goroutine blocked in a read, so it starts
// only when someone asks for Done: the engine does that only when a
// receive is about to wait (engine/receive.go), never on the hot path of a
// send, a delete or a receive that finds messages. A forward connection
// carries one request at a time, so nothing may arrive while a request
// runs: the watcher's read ends at the peer's close (EOF), and a byte
// that does arrive marks the connection out of step (it is closed).
//
// Owner: the serveForward goroutine (reset, stop); Done and Err may be
// called from any goroutine (mu); the watcher goroutine writes err and gone
// before it closes done or exited, and they are read after.

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

type connCtx struct {
	context.Context // the base: its values and deadline; its end ends this one too

	c        net.Conn
	mu       sync.Mutex    // Done and Err may be called from any goroutine
	watching bool          // guarded by mu: Done was asked for this request
	stopped  bool          // owner: the request ended (stop)
	done     chan struct{} // guarded by mu; closed by the watcher when the context ends
	exited   chan struct{} // closed by the watcher when it returns
	err      error         // written by the watcher before close(done)
	gone     bool          // written by the watcher before close(exited): the peer closed, or sent a byte unasked
	quit     chan struct{} // closed by stop: the watcher's read ended for that
}

// reset readies ctx for the next request on c.
func (x *connCtx) reset(base context.Context, c net.Conn) {
	*x = connCtx{Context: base, c: c}
}

// Done starts the watcher (once per request) and returns its channel.
func (x *connCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.watching {
		return x.done
	}
	x.watching = true
	x.done, x.exited, x.quit = make(chan struct{}), make(chan struct{}), make(chan struct{})
	base := context.AfterFunc(x.Context, func() { x.c.SetReadDeadline(time.Now()) })
	go func() {
		defer close(x.exited)
		var b [1]byte
		n, err := x.c.Read(b[:])
		base()
		// A deadline (stop's, or the base's end) leaves the connection
		// usable; EOF, another error or a byte unasked does not.
		x.gone = n > 0 || !errors.Is(err, os.ErrDeadlineExceeded)
		select {
		case <-x.quit: // stop moved the deadline: the request ended first
			return
		default:
		}
		if err := x.Context.Err(); err != nil {
			x.err = err
		} else {
			x.err = context.Canceled // the forwarding node went away
		}
		close(x.done)
	}()
	return x.done
}

func (x *connCtx) Err() error {
	x.mu.Lock()
	watching, done := x.watching, x.done
	x.mu.Unlock()
	if !watching {
		return x.Context.Err()
	}
	select {
	case <-done:
		return x.err
	default:
		return nil
	}
}

// stop ends the request's watch, if one started; false if the connection
// cannot carry the answer or another request (the peer closed it, or sent
// a byte unasked). The base's end alone leaves it usable: the answer goes.
func (x *connCtx) stop() bool {
	x.mu.Lock()
	watching := x.watching
	x.mu.Unlock()
	if !watching || x.stopped {
		return true
	}
	x.stopped = true
	close(x.quit)
	x.c.SetReadDeadline(time.Now())
	<-x.exited
	x.c.SetReadDeadline(time.Time{})
	return !x.gone
}
