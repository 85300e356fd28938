package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
)

// frame is a forward frame: length u32 | payload.
func frame(payload []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// TestReadFrame: a frame read whole or in pieces gives its payload after
// what dst held; a bad length, bytes past the frame and a cut are errors.
func TestReadFrame(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // 16 KiB: past the first read's 4 KiB
	cases := []struct {
		name    string
		writes  [][]byte
		want    []byte
		wantErr error
	}{
		{"whole", [][]byte{frame([]byte("hello"))}, []byte("hello"), nil},
		{"length apart", [][]byte{frame([]byte("hello"))[:2], frame([]byte("hello"))[2:5], []byte("ello")}, []byte("hello"), nil},
		{"larger than a read", [][]byte{frame(big)[:3000], frame(big)[3000:]}, big, nil},
		{"empty", [][]byte{frame(nil)}, nil, errFrameSize},
		{"too large", [][]byte{binary.LittleEndian.AppendUint32(nil, maxForwardBytes+1)}, nil, errFrameSize},
		{"bytes past the frame", [][]byte{append(frame([]byte("hi")), 'x')}, nil, errOutOfStep},
		{"cut in the payload", [][]byte{frame([]byte("hello"))[:6]}, nil, io.ErrUnexpectedEOF},
		{"nothing", nil, nil, io.EOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			go func() {
				for _, w := range tc.writes {
					a.Write(w)
				}
				a.Close()
			}()
			dst := []byte("kept:")
			got, size, err := readFrame(b, dst)
			b.Close()
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if size != len(tc.want) || !bytes.Equal(got, append([]byte("kept:"), tc.want...)) {
				t.Fatalf("got %d bytes %.40q, want %.40q after kept:", size, got, tc.want)
			}
		})
	}
}
