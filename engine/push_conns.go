package engine

// The pusher's bound on its open connections (PushOptions.MaxConns).

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// DefaultPushMaxConns is PushOptions.MaxConns's default.
const DefaultPushMaxConns = 256

// errPushConnsBusy: no connection slot came free within the dial's
// timeout.
var errPushConnsBusy = errors.New("engine: push: every connection slot is busy (PushOptions.MaxConns)")

// boundedDial dials with d once it holds one of conns' slots, which the
// connection gives back when it is closed (PushOptions.MaxConns). With
// none free it closes the idle connections (closeIdle: of both clients,
// which share the slots; net/http never closes an idle connection to make
// room, and a new endpoint waited while warm ones kept theirs: review G)
// and waits at most d.Timeout: net/http runs a dial apart from its
// request, so the request's end does not end the wait (waiting dials
// piled up, and outlived the broker: review G). stop ends it too.
func boundedDial(d *net.Dialer, conns chan struct{}, closeIdle func(), stop <-chan struct{}) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case conns <- struct{}{}:
		default:
			closeIdle()
			t := time.NewTimer(d.Timeout)
			defer t.Stop()
			select {
			case conns <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-stop:
				return nil, ErrClosed
			case <-t.C:
				return nil, errPushConnsBusy
			}
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			<-conns
			return nil, err
		}
		return &slotConn{Conn: c, conns: conns}, nil
	}
}

// slotConn gives its slot back at its first Close.
type slotConn struct {
	net.Conn
	conns chan struct{}
	once  sync.Once
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.conns })
	return err
}
