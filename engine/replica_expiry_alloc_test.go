package engine

import "testing"

// TestFollowerExpiryAppendEncodesNothing: a follower's expiries reach
// replStore.append (flushLocked) and are refused with ErrNotLeader; 886b011
// encodes the proposal before r.mu, so every such flush on every follower
// allocated and filled a buffer of its whole batch (512 records: ~35 KB)
// only to drop it.
func TestFollowerExpiryAppendEncodesNothing(t *testing.T) {
	h, _ := newHandShard(t)
	r := h.follower.store.(*replStore)
	heads := make([][snapLen]byte, 512)
	recs := make([]logRec, len(heads))
	for i := range recs {
		putSnap(heads[i][:], 1, 0, uint32(i), &slot{seq: uint64(i + 1), expOff: 1000})
		recs[i] = logRec{typ: recExpire, head: heads[i][:]}
	}
	r.append(recs) // the first remembers them (replica_expiry.go)
	allocs := testing.AllocsPerRun(20, func() {
		if err := r.append(recs); err == nil {
			t.Fatal("a follower's append succeeded")
		}
	})
	if allocs > 0 {
		t.Errorf("a follower's refused expiry append allocates %.0f times", allocs)
	}
}
