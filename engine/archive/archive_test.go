package archive

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

type file struct {
	h    FileHeader
	data []byte
}

func write(t testing.TB, files []file) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Manifest{Format: 7, Created: time.Unix(1, 0).UTC(), Fields: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := w.Create(f.h); err != nil {
			t.Fatal(err)
		}
		// In pieces of odd sizes, so that frames do not follow the writes.
		for p := f.data; len(p) > 0; {
			n := min(len(p), 1+len(p)/3)
			if _, err := w.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// read reads a whole archive; it reads only part of every third file's
// data when skip is set, to check that Next passes over the rest.
func read(b []byte, skip bool) (Manifest, []file, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return Manifest{}, nil, err
	}
	var out []file
	for i := 0; ; i++ {
		h, err := r.Next()
		if err == io.EOF {
			return r.Manifest(), out, nil
		}
		if err != nil {
			return r.Manifest(), out, err
		}
		var data []byte
		if skip && i%3 == 2 {
			data = make([]byte, 10)
			n, err := io.ReadFull(r, data)
			if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
				return r.Manifest(), out, err
			}
			data = data[:n]
		} else if data, err = io.ReadAll(r); err != nil {
			return r.Manifest(), out, err
		}
		out = append(out, file{h, data})
	}
}

func sample(rng *rand.Rand) []file {
	var files []file
	for i := 0; i < 1+rng.IntN(6); i++ {
		data := make([]byte, rng.IntN(3*MaxData))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if rng.IntN(3) == 0 {
			data = nil
		}
		files = append(files, file{FileHeader{Name: "d/f" + string(rune('a'+i)), Mode: 0o600, ExtendTo: int64(rng.IntN(100))}, data})
	}
	return files
}

func TestRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		files := sample(rng)
		b := write(t, files)
		m, got, err := read(b, false)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if m.Format != 7 || m.Fields["k"] != "v" || !m.Created.Equal(time.Unix(1, 0)) {
			t.Fatalf("seed %d: manifest %+v", seed, m)
		}
		if len(got) != len(files) {
			t.Fatalf("seed %d: %d files read, %d written", seed, len(got), len(files))
		}
		for i := range files {
			if got[i].h != files[i].h || !bytes.Equal(got[i].data, files[i].data) {
				t.Fatalf("seed %d: file %d differs: %+v (%d bytes) against %+v (%d bytes)",
					seed, i, got[i].h, len(got[i].data), files[i].h, len(files[i].data))
			}
		}
		if _, _, err := read(b, true); err != nil {
			t.Fatalf("seed %d, files partly read: %v", seed, err)
		}
	}
}

// Every cut and every flipped bit is found before the archive is used up.
func TestDamageIsFound(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	files := []file{{FileHeader{Name: "a", Mode: 0o600}, []byte("hello")}, {FileHeader{Name: "b/c", Mode: 0o600}, bytes.Repeat([]byte{7}, MaxData+5)}}
	b := write(t, files)
	cuts := []int{0, 1, len(Magic), len(Magic) + 3, len(b) - 1, len(b) - frameHead}
	for i := 0; i < 200; i++ {
		cuts = append(cuts, rng.IntN(len(b)))
	}
	for _, n := range cuts {
		if _, _, err := read(b[:n], false); !errors.Is(err, ErrDamaged) {
			t.Fatalf("cut at %d of %d: %v, want ErrDamaged", n, len(b), err)
		}
	}
	for i := 0; i < 300; i++ {
		c := bytes.Clone(b)
		p := rng.IntN(len(c))
		c[p] ^= 1 << rng.IntN(8)
		if _, _, err := read(c, i%2 == 0); !errors.Is(err, ErrDamaged) {
			t.Fatalf("bit flipped at byte %d: %v, want ErrDamaged", p, err)
		}
	}
	// A frame dropped or repeated (the frame numbers seed the checksums).
	first := len(Magic)
	mlen := frameHead + int(uint32(b[first+4])|uint32(b[first+5])<<8)
	second := first + mlen
	flen := frameHead + int(uint32(b[second+4])|uint32(b[second+5])<<8)
	dropped := append(bytes.Clone(b[:second]), b[second+flen:]...)
	repeated := append(bytes.Clone(b[:second+flen]), b[second:]...)
	for name, c := range map[string][]byte{"dropped": dropped, "repeated": repeated, "trailing": append(bytes.Clone(b), 0)} {
		if _, _, err := read(c, false); !errors.Is(err, ErrDamaged) {
			t.Fatalf("a frame %s: %v, want ErrDamaged", name, err)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"a", "wal/0000000000000000.wal", "push-signing.key", "a_b/c.d"} {
		if !ValidName(n) {
			t.Errorf("%q refused", n)
		}
	}
	for _, n := range []string{"", "/a", "../a", "a/../b", "a/", "a//b", "./a", "a/.", "a b", "a\\b", "é", string(make([]byte, 256))} {
		if ValidName(n) {
			t.Errorf("%q accepted", n)
		}
	}
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Manifest{})
	if err := w.Create(FileHeader{Name: "../x"}); err == nil {
		t.Fatal("Create took ../x")
	}
}

func FuzzReader(f *testing.F) {
	f.Add(write(f, []file{{FileHeader{Name: "a", Mode: 0o600}, []byte("x")}}))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, files, err := read(b, len(b)%2 == 0)
		if err == nil {
			for _, fl := range files {
				if !ValidName(fl.h.Name) {
					t.Fatalf("a file named %q read", fl.h.Name)
				}
			}
		}
	})
}
