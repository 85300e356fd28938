// Package archive is the format of smqd's backups: named files in one
// stream of checksummed frames, written and read front to back, so that a
// backup can be streamed (over HTTP, through a pipe) without knowing any
// file's size in advance, and a reader finds a truncated, reordered or
// damaged archive before it has used a byte of it.
//
// The package knows nothing of what the files hold (engine/backup.go
// does). It imports nothing of smqd's, so that a client (smqctl) can check
// an archive as it downloads it.
//
// # Format, version 1 (part of the on-disk format; never change)
//
//	magic   8 bytes  "SMQDBAK1"
//	frames  until the end frame; nothing may follow it
//
// A frame:
//
//	offset size field
//	0      1    kind: 'M' manifest, 'F' file, 'D' data, 'E' end
//	1      3    zero
//	4      4    payload length, uint32 little-endian
//	8      8    checksum, uint64 little-endian
//	16     n    payload
//
// checksum = xxhash64(frame number as 8 LE bytes || bytes 0..7 || payload),
// the first frame after the magic being number 0. Seeding with the number
// makes a frame dropped, repeated or moved fail its check.
//
// The first frame is the manifest (JSON, Manifest), the last the end
// (JSON, end: the count of files and of data bytes, checked against what
// was read). A file is an 'F' frame (JSON, FileHeader) followed by its
// 'D' frames (at most MaxData bytes each) in order, up to the next 'F' or
// 'E'. JSON payloads are at most maxJSON bytes.
package archive

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Magic starts every archive.
const Magic = "SMQDBAK1"

// MaxData is the largest data frame's payload.
const MaxData = 1 << 20

const (
	frameHead = 16
	maxJSON   = 64 << 10

	kindManifest = 'M'
	kindFile     = 'F'
	kindData     = 'D'
	kindEnd      = 'E'
)

// ErrDamaged wraps every error about the archive's own bytes: a bad magic
// or checksum, a frame out of place, a truncated stream.
var ErrDamaged = errors.New("archive: damaged")

// Manifest describes an archive; the writer's caller fills it.
type Manifest struct {
	Format  int       `json:"format"` // the format of what the files hold (the caller's)
	Created time.Time `json:"created"`
	// Fields are the caller's description (positions, versions).
	Fields map[string]string `json:"fields,omitempty"`
}

// FileHeader is one file of the archive.
type FileHeader struct {
	// Name is the file's path, relative, with '/' separators (ValidName).
	Name string `json:"name"`
	// Mode is the file's permission bits.
	Mode uint32 `json:"mode"`
	// ExtendTo, when larger than the file's data, is the length the file
	// is extended to with zeros (a preallocated log segment).
	ExtendTo int64 `json:"extend_to,omitempty"`
}

// end is the end frame's payload.
type end struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// ValidName reports whether name may name a file of an archive: relative,
// clean, of letters, digits, '.', '_', '-' and '/', no element "." or "..",
// at most 255 bytes. A restore can join it to its directory safely.
func ValidName(name string) bool {
	if name == "" || len(name) > 255 || path.Clean(name) != name || name[0] == '/' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/'
		if !ok {
			return false
		}
	}
	for _, el := range splitPath(name) {
		if el == "." || el == ".." || el == "" {
			return false
		}
	}
	return true
}

func splitPath(name string) []string {
	var out []string
	for {
		i := 0
		for i < len(name) && name[i] != '/' {
			i++
		}
		out = append(out, name[:i])
		if i == len(name) {
			return out
		}
		name = name[i+1:]
	}
}

func checksum(n uint64, head []byte, payload []byte) uint64 {
	d := xxhash.New()
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], n)
	_, _ = d.Write(nb[:])
	_, _ = d.Write(head[:8])
	_, _ = d.Write(payload)
	return d.Sum64()
}

// Writer writes an archive.
type Writer struct {
	w     io.Writer
	n     uint64 // frames written
	buf   []byte // the current file's data not yet framed
	open  bool   // a file is open
	files int
	bytes int64
	err   error // sticky
}

// NewWriter writes the magic and the manifest to w.
func NewWriter(w io.Writer, m Manifest) (*Writer, error) {
	aw := &Writer{w: w}
	if _, err := io.WriteString(w, Magic); err != nil {
		return nil, err
	}
	if err := aw.frameJSON(kindManifest, m); err != nil {
		return nil, err
	}
	return aw, nil
}

func (aw *Writer) frame(kind byte, payload []byte) error {
	if aw.err != nil {
		return aw.err
	}
	var h [frameHead]byte
	h[0] = kind
	binary.LittleEndian.PutUint32(h[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(h[8:], checksum(aw.n, h[:], payload))
	aw.n++
	if _, err := aw.w.Write(h[:]); err != nil {
		aw.err = err
		return err
	}
	if _, err := aw.w.Write(payload); err != nil {
		aw.err = err
		return err
	}
	return nil
}

func (aw *Writer) frameJSON(kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxJSON {
		return fmt.Errorf("archive: a %c frame of %d bytes (at most %d)", kind, len(b), maxJSON)
	}
	return aw.frame(kind, b)
}

// Create starts a file; Write then adds its data, until the next Create or
// Close.
func (aw *Writer) Create(h FileHeader) error {
	if !ValidName(h.Name) {
		return fmt.Errorf("archive: invalid file name %q", h.Name)
	}
	if err := aw.flush(); err != nil {
		return err
	}
	aw.open = true
	aw.files++
	return aw.frameJSON(kindFile, h)
}

// Write adds p to the current file.
func (aw *Writer) Write(p []byte) (int, error) {
	if !aw.open {
		return 0, errors.New("archive: Write before Create")
	}
	n := 0
	for len(p) > 0 {
		if aw.err != nil {
			return n, aw.err
		}
		if aw.buf == nil {
			aw.buf = make([]byte, 0, MaxData)
		}
		k := min(len(p), MaxData-len(aw.buf))
		aw.buf = append(aw.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(aw.buf) == MaxData {
			if err := aw.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (aw *Writer) flush() error {
	if len(aw.buf) == 0 {
		return aw.err
	}
	err := aw.frame(kindData, aw.buf)
	aw.bytes += int64(len(aw.buf))
	aw.buf = aw.buf[:0]
	return err
}

// Close ends the archive with its end frame. It does not close the
// underlying writer.
func (aw *Writer) Close() error {
	if err := aw.flush(); err != nil {
		return err
	}
	aw.open = false
	return aw.frameJSON(kindEnd, end{Files: aw.files, Bytes: aw.bytes})
}

// Reader reads an archive, checking every frame.
type Reader struct {
	r      io.Reader
	n      uint64 // frames read
	off    int64  // bytes read, for errors
	m      Manifest
	kind   byte   // the frame read ahead (0: none)
	data   []byte // payload of the read-ahead frame; for a data frame, what is left of it
	buf    []byte // data's backing array
	files  int
	bytes  int64
	inFile bool
	done   bool
	err    error // sticky
}

// NewReader reads and checks the magic and the manifest.
func NewReader(r io.Reader) (*Reader, error) {
	ar := &Reader{r: r}
	var mg [len(Magic)]byte
	if _, err := io.ReadFull(r, mg[:]); err != nil || string(mg[:]) != Magic {
		return nil, fmt.Errorf("%w: not an smqd backup (no %q at its start)", ErrDamaged, Magic)
	}
	ar.off = int64(len(Magic))
	if err := ar.next(); err != nil {
		return nil, err
	}
	if ar.kind != kindManifest {
		return nil, ar.damaged("the first frame is %q, not the manifest", ar.kind)
	}
	if err := json.Unmarshal(ar.data, &ar.m); err != nil {
		return nil, ar.damaged("manifest: %v", err)
	}
	ar.kind = 0
	return ar, nil
}

// Manifest returns the archive's manifest.
func (ar *Reader) Manifest() Manifest { return ar.m }

func (ar *Reader) damaged(format string, args ...any) error {
	ar.err = fmt.Errorf("%w: at byte %d (frame %d): %s", ErrDamaged, ar.off, ar.n, fmt.Sprintf(format, args...))
	return ar.err
}

// next reads and checks one frame into kind and data.
func (ar *Reader) next() error {
	if ar.err != nil {
		return ar.err
	}
	var h [frameHead]byte
	if _, err := io.ReadFull(ar.r, h[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return ar.damaged("the archive ends before its end frame (truncated)")
		}
		ar.err = err
		return err
	}
	kind, n := h[0], binary.LittleEndian.Uint32(h[4:])
	if h[1] != 0 || h[2] != 0 || h[3] != 0 {
		return ar.damaged("bad frame header")
	}
	limit := uint32(maxJSON)
	if kind == kindData {
		limit = MaxData
	}
	if n > limit {
		return ar.damaged("a %q frame of %d bytes (at most %d)", kind, n, limit)
	}
	if cap(ar.buf) < int(n) {
		ar.buf = make([]byte, max(int(n), 4096))
	}
	ar.data = ar.buf[:n]
	if _, err := io.ReadFull(ar.r, ar.data); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return ar.damaged("the archive ends inside a frame (truncated)")
		}
		ar.err = err
		return err
	}
	if checksum(ar.n, h[:], ar.data) != binary.LittleEndian.Uint64(h[8:]) {
		return ar.damaged("checksum mismatch")
	}
	ar.n++
	ar.off += frameHead + int64(n)
	ar.kind = kind
	return nil
}

// Next moves to the next file and returns its header; io.EOF after the end
// frame, once the archive is checked complete (no byte follows it).
func (ar *Reader) Next() (FileHeader, error) {
	for {
		if ar.done {
			return FileHeader{}, io.EOF
		}
		if ar.kind == 0 {
			if err := ar.next(); err != nil {
				return FileHeader{}, err
			}
		}
		switch ar.kind {
		case kindData:
			if !ar.inFile {
				return FileHeader{}, ar.damaged("data before any file")
			}
			ar.bytes += int64(len(ar.data))
			ar.kind = 0 // the rest of the current file, unread: skipped
		case kindFile:
			var h FileHeader
			if err := json.Unmarshal(ar.data, &h); err != nil {
				return h, ar.damaged("file header: %v", err)
			}
			if !ValidName(h.Name) {
				return h, ar.damaged("invalid file name %q", h.Name)
			}
			ar.kind, ar.data, ar.inFile = 0, ar.data[:0], true
			ar.files++
			return h, nil
		case kindEnd:
			var e end
			if err := json.Unmarshal(ar.data, &e); err != nil {
				return FileHeader{}, ar.damaged("end frame: %v", err)
			}
			if e.Files != ar.files || e.Bytes != ar.bytes {
				return FileHeader{}, ar.damaged("the end frame counts %d files and %d bytes; the archive held %d and %d",
					e.Files, e.Bytes, ar.files, ar.bytes)
			}
			var one [1]byte
			if n, _ := io.ReadFull(ar.r, one[:]); n > 0 {
				return FileHeader{}, ar.damaged("bytes after the end frame")
			}
			ar.done, ar.inFile, ar.kind = true, false, 0
			return FileHeader{}, io.EOF
		default:
			return FileHeader{}, ar.damaged("unknown frame kind %q", ar.kind)
		}
	}
}

// Read reads the current file's data; io.EOF at its end.
func (ar *Reader) Read(p []byte) (int, error) {
	if !ar.inFile {
		return 0, io.EOF
	}
	for {
		if ar.kind == kindData && len(ar.data) > 0 {
			n := copy(p, ar.data)
			ar.data = ar.data[n:]
			ar.bytes += int64(n)
			return n, nil
		}
		if ar.kind == kindData { // used up
			ar.kind = 0
		}
		if ar.kind != 0 {
			return 0, io.EOF // a file or end frame: this file is done
		}
		if err := ar.next(); err != nil {
			return 0, err
		}
		if ar.kind != kindData {
			return 0, io.EOF
		}
	}
}
