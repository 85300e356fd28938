package wal

// ring.go owns the mapping of log positions onto the in-memory ring: the
// byte of Pos p lives at ring offset p mod len(buf), so the ring always
// holds the most recent len(buf) bytes of the log (positions are dense) and
// a record may wrap around the end of the buffer.
//
// Who touches what: appenders write [End, End+n) under Log.mu (exclusive);
// ring readers copy under Log.mu (shared); the writer goroutine reads the
// unwritten span [WrittenEnd, End) without the lock, which is safe because
// appenders never write there (invariant 5: End-WrittenEnd <= len(buf)).

type ring struct {
	buf []byte
}

func newRing(n int) ring { return ring{buf: make([]byte, n)} }

func (r *ring) size() int { return len(r.buf) }

func (r *ring) off(p Pos) int { return int(uint64(p) % uint64(len(r.buf))) }

// write copies b into the ring at position p.
func (r *ring) write(p Pos, b []byte) {
	o := r.off(p)
	n := copy(r.buf[o:], b)
	copy(r.buf, b[n:])
}

// zero clears n bytes at position p (n < len(buf)).
func (r *ring) zero(p Pos, n int) {
	o := r.off(p)
	if o+n <= len(r.buf) {
		clear(r.buf[o : o+n])
		return
	}
	clear(r.buf[o:])
	clear(r.buf[:n-(len(r.buf)-o)])
}

// read copies len(dst) bytes at position p into dst.
func (r *ring) read(p Pos, dst []byte) {
	o := r.off(p)
	n := copy(dst, r.buf[o:])
	copy(dst[n:], r.buf)
}

// spans returns the ring's bytes for [p, p+n) as one or two slices (two when
// the range wraps); b is nil when it does not.
func (r *ring) spans(p Pos, n int) (a, b []byte) {
	o := r.off(p)
	if o+n <= len(r.buf) {
		return r.buf[o : o+n], nil
	}
	return r.buf[o:], r.buf[:n-(len(r.buf)-o)]
}
