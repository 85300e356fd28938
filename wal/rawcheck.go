package wal

// RawChecker verifies the records of a segment's bytes as ReadRaw gives
// them, so that a byte-for-byte copy of the log (an online backup, or its
// restore) notices a damaged record instead of copying it on. It makes the
// checks Reader makes of every record: header, length, checksum and zero
// padding. A compressed payload's checksum is verified, not its
// decompression.
//
// Invariants:
//  1. Every byte fed is covered by exactly one verified record, or Write or
//     Close returns an error naming the first one that is not (its
//     position and why).
//  2. A record split between two writes is verified once it is whole; only
//     its bytes are kept meanwhile (at most a record's framed size).

// RawChecker checks one segment's bytes, fed in order from a record
// boundary. It is not safe for concurrent use.
type RawChecker struct {
	seg  Pos    // the segment's start, for the error
	pos  Pos    // the position of the next byte to verify
	part []byte // a record's bytes not yet whole (invariant 2)
	err  error  // sticky
}

// NewRawChecker returns a checker of the bytes of the segment that starts
// at seg, fed from position from (a record boundary: the segment's start
// for a whole copy).
func NewRawChecker(seg, from Pos) *RawChecker {
	return &RawChecker{seg: seg, pos: from}
}

// Pos returns the position up to which the bytes fed were whole, verified
// records.
func (c *RawChecker) Pos() Pos { return c.pos }

// Write verifies the whole records of b, the bytes that follow the ones
// fed before, and keeps a record that b cuts short for the next write. It
// returns a *CorruptionError for the first record that does not verify;
// after one, every call returns it.
func (c *RawChecker) Write(b []byte) error {
	if c.err != nil {
		return c.err
	}
	for len(b) > 0 {
		if len(c.part) > 0 {
			// Complete the kept record first: its header, then its frame
			// (which may be the header alone: a skip record of no payload).
			if len(c.part) < headerSize {
				k := min(headerSize-len(c.part), len(b))
				c.part = append(c.part, b[:k]...)
				b = b[k:]
				if len(c.part) < headerSize {
					continue // b is used up
				}
			}
			hi, reason := parseHeader(c.part)
			if reason != "" {
				return c.fail(reason)
			}
			need := framedSize(hi.n)
			k := min(need-len(c.part), len(b))
			c.part = append(c.part, b[:k]...)
			b = b[k:]
			if len(c.part) < need {
				continue // b is used up
			}
			if err := c.verify(c.part); err != nil {
				return err
			}
			c.part = c.part[:0]
			continue
		}
		n, whole, err := c.verifyIn(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if !whole {
			c.part = append(c.part[:0], b...)
			b = nil
		}
	}
	return nil
}

// verifyIn verifies the records at the start of b, in place, and returns
// the bytes they take; whole is false where b ends inside a record.
func (c *RawChecker) verifyIn(b []byte) (n int, whole bool, err error) {
	for n < len(b) {
		rest := b[n:]
		if len(rest) < headerSize {
			return n, false, nil
		}
		hi, reason := parseHeader(rest)
		if reason != "" {
			return n, false, c.fail(reason)
		}
		framed := framedSize(hi.n)
		if len(rest) < framed {
			return n, false, nil
		}
		if err := c.verify(rest[:framed]); err != nil {
			return n, false, err
		}
		n += framed
	}
	return n, true, nil
}

// verify checks one whole framed record at c.pos and moves past it.
func (c *RawChecker) verify(rec []byte) error {
	if _, _, _, reason := decodeRecord(c.pos, rec); reason != "" {
		return c.fail(reason)
	}
	c.pos += Pos(len(rec))
	return nil
}

// Close reports a record that the bytes fed cut short.
func (c *RawChecker) Close() error {
	if c.err == nil && len(c.part) > 0 {
		return c.fail("truncated")
	}
	return c.err
}

func (c *RawChecker) fail(reason string) error {
	c.err = &CorruptionError{Segment: c.seg, Offset: int64(c.pos - c.seg), Pos: c.pos, Reason: reason}
	return c.err
}
