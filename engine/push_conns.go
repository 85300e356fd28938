package engine

// The pusher's bound on its open connections (PushOptions.MaxConns).

import (
	"context"
	"net"
	"sync"
)

// DefaultPushMaxConns is PushOptions.MaxConns's default.
const DefaultPushMaxConns = 256

// boundedDial dials with d once it holds one of conns' slots, which the
// connection gives back when it is closed (PushOptions.MaxConns).
func boundedDial(d *net.Dialer, conns chan struct{}) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case conns <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
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
