package wal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			for _, fsName := range []string{"mem", "os"} {
				t.Run(fsName, func(t *testing.T) {
					var fs FS = NewMemFS()
					if fsName == "os" {
						fs = OSFS()
					}
					dir := t.TempDir()
					opts := testOptions(t, fs)
					opts.Sync = mode
					l := mustOpen(t, dir, opts)
					var recs []Record
					for i := range 200 {
						n := (i * 37) % 3000
						recs = append(recs, appendWait(t, l, RecordType(1+i%200), testPayload(uint64(i), n, i%3 == 0)))
					}
					for i, r := range recs {
						typ, got, err := l.ReadAt(r.Pos, 0, nil)
						if err != nil || typ != RecordType(1+i%200) || !bytes.Equal(got, testPayload(uint64(i), (i*37)%3000, i%3 == 0)) {
							t.Fatalf("ReadAt %d: typ %d err %v", i, typ, err)
						}
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					if err := l.Close(); !errors.Is(err, ErrClosed) {
						t.Fatalf("second close: %v", err)
					}
					l = mustOpen(t, dir, opts)
					defer l.Close()
					for i, r := range recs {
						typ, got, err := l.ReadAt(r.Pos, r.Size, nil)
						if err != nil || typ != RecordType(1+i%200) || !bytes.Equal(got, testPayload(uint64(i), (i*37)%3000, i%3 == 0)) {
							t.Fatalf("ReadAt after reopen %d: typ %d err %v", i, typ, err)
						}
					}
					m, order, err := readAll(t, l, 0)
					if err != nil || len(m) != len(recs) || len(order) != len(recs) {
						t.Fatalf("readAll: %d records, err %v", len(m), err)
					}
					t.Logf("segments %+v stats %+v", l.Segments(), l.Stats())
				})
			}
		})
	}
}
