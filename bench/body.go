package bench

// Message bodies carry their send time, so a consumer can measure the
// end-to-end latency: the first 16 bytes are the send (or, open loop, the
// scheduled) time in Unix nanoseconds as lower-case hex, the rest is
// filler from [a-z]. Bodies are plain [0-9a-z] so no protocol needs to
// escape them.

const stampLen = 16

const hexDigits = "0123456789abcdef"

// newBody returns a body of size bytes (at least stampLen).
func newBody(size int, seed uint64) []byte {
	if size < stampLen {
		size = stampLen
	}
	b := make([]byte, size)
	x := seed | 1
	for i := stampLen; i < size; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = 'a' + byte(x%26)
	}
	return b
}

// putStamp writes t (Unix ns) into the body's first 16 bytes.
func putStamp(b []byte, t int64) {
	u := uint64(t)
	for i := stampLen - 1; i >= 0; i-- {
		b[i] = hexDigits[u&15]
		u >>= 4
	}
}

// stampOf reads the send time from a body; ok is false if the body does
// not start with one.
func stampOf(b []byte) (t int64, ok bool) {
	if len(b) < stampLen {
		return 0, false
	}
	var u uint64
	for _, c := range b[:stampLen] {
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return int64(u), true
}
