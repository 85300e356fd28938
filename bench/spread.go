package bench

import (
	"context"
	"errors"
	"sync/atomic"
)

// Spread is one target over several endpoints of the same service (the
// nodes of an smqd cluster): its workers' clients are handed out round
// robin over the endpoints; queues are prepared and measured through the
// first.
type Spread struct {
	ts   []Target
	next atomic.Uint64
}

// NewSpread returns a target over ts (at least one).
func NewSpread(ts []Target) *Spread { return &Spread{ts: ts} }

// Name returns the first endpoint's target name.
func (s *Spread) Name() string { return s.ts[0].Name() }

// Prepare prepares the queues through the first endpoint, then tells the
// others the names (without touching the queues again).
func (s *Spread) Prepare(ctx context.Context, names []string, fresh bool) error {
	if err := s.ts[0].Prepare(ctx, names, fresh); err != nil {
		return err
	}
	for _, t := range s.ts[1:] {
		if err := t.Prepare(ctx, names, false); err != nil {
			return err
		}
	}
	return nil
}

// NewClient returns a client of the next endpoint.
func (s *Spread) NewClient(ctx context.Context) (Client, error) {
	i := s.next.Add(1) - 1
	return s.ts[i%uint64(len(s.ts))].NewClient(ctx)
}

// Backlog asks the first endpoint.
func (s *Spread) Backlog(ctx context.Context, i int) (int64, error) { return s.ts[0].Backlog(ctx, i) }

// Close closes every endpoint's target.
func (s *Spread) Close() error {
	var errs []error
	for _, t := range s.ts {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}
