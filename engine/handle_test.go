package engine

import (
	"errors"
	"regexp"
	"testing"
)

var handleAlphabet = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

func TestReceiptHandleRoundTrip(t *testing.T) {
	k := handleKey{1, 2, 3}
	for _, c := range []struct {
		stripe uint8
		slot   uint32
		seq    uint64
		gen    uint32
	}{{0, 0, 1, 1}, {255, maxSlots - 1, ^uint64(0), ^uint32(0)}, {3, 12345, 99, 7}} {
		h := k.issue(c.stripe, c.slot, c.seq, c.gen)
		text := h.String()
		if len(text) != handleTextLen || !handleAlphabet.MatchString(text) {
			t.Fatalf("handle text %q", text)
		}
		back, err := ParseReceiptHandle([]byte(text))
		if err != nil || back != h || !k.verify(back) {
			t.Fatalf("round trip %q: %+v %v", text, back, err)
		}
	}
}

func TestReceiptHandleRejectsGarbageAndForgeries(t *testing.T) {
	k := handleKey{9}
	h := k.issue(1, 2, 3, 4)
	text := h.String()
	for _, bad := range []string{"", "1-", text[:len(text)-1], text + "0", "2" + text[1:], "1+" + text[2:],
		"1-" + "G" + text[3:], "MbZj6wDWli+QEauMZc8ZRv37sIW2iJKq3M9Mx/KSbkJ0"} {
		if _, err := ParseReceiptHandle([]byte(bad)); !errors.Is(err, ErrReceiptHandleError) {
			t.Errorf("ParseReceiptHandle(%q) = %v", bad, err)
		}
	}
	// Lower-case hex parses to the same handle.
	lower := []byte(text)
	for i := 2; i < len(lower); i++ {
		if lower[i] >= 'A' && lower[i] <= 'F' {
			lower[i] += 'a' - 'A'
		}
	}
	if back, err := ParseReceiptHandle(lower); err != nil || back != h {
		t.Fatalf("lower-case: %v", err)
	}
	// Any change to the identifying fields or the check fails the keyed check.
	for _, f := range []func(*ReceiptHandle){
		func(x *ReceiptHandle) { x.stripe++ }, func(x *ReceiptHandle) { x.slot++ },
		func(x *ReceiptHandle) { x.seq++ }, func(x *ReceiptHandle) { x.gen++ },
		func(x *ReceiptHandle) { x.check ^= 1 },
	} {
		x := h
		f(&x)
		if k.verify(x) {
			t.Errorf("forged handle %+v verified", x)
		}
	}
	other := handleKey{10}
	if other.verify(h) {
		t.Error("handle verified under another queue's key")
	}
}

func FuzzParseReceiptHandle(f *testing.F) {
	k := handleKey{7}
	f.Add([]byte(k.issue(1, 2, 3, 4).String()))
	f.Add([]byte("1-000000000000000000000000000000000000000000"))
	f.Add([]byte("8-0zxjHBaWtzPz8zphz0z6OGz5yWWidU1fJM"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, text []byte) {
		h, err := ParseReceiptHandle(text)
		if err != nil {
			if !errors.Is(err, ErrReceiptHandleError) || !h.IsZero() {
				t.Fatalf("error %v with handle %+v", err, h)
			}
			return
		}
		// Whatever parses prints back to the same handle in the wire alphabet.
		again, err := ParseReceiptHandle([]byte(h.String()))
		if err != nil || again != h || !handleAlphabet.MatchString(h.String()) {
			t.Fatalf("%q -> %+v -> %q -> %+v %v", text, h, h.String(), again, err)
		}
		// A parsed handle never verifies unless its check was computed with
		// the key (the fuzzer does not know k).
		if k.verify(h) && h != k.issue(h.stripe, h.slot, h.seq, h.gen) {
			t.Fatalf("verify inconsistent for %+v", h)
		}
	})
}
