package wal

// fs.go defines the narrow file-system interface every byte of the log goes
// through, and its OS implementation. Tests swap in MemFS (power-loss
// simulation) or FaultFS (error injection).

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// FS is the file-system surface the log uses. Names are full paths.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	// ReadDir returns the names (not paths) of the entries of dir.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// FreeBytes returns the bytes an unprivileged writer may still allocate
	// on the file system holding dir (statfs f_bavail × f_bsize on linux).
	// Where the OS cannot tell, it returns an error wrapping
	// errors.ErrUnsupported.
	FreeBytes(dir string) (int64, error)
}

// File is an open file of an FS. ReadAt and WriteAt may be called
// concurrently on different ranges.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the written data durable (fdatasync on the OS FS).
	Sync() error
	Truncate(size int64) error
	// Preallocate reserves size bytes, extending the file with zeros
	// (fallocate on linux; best effort elsewhere).
	Preallocate(size int64) error
	Size() (int64, error)
	Close() error
}

// vecWriterAt is a File that can write several buffers back to back in one
// call (the OS file on linux: pwritev). Others get one WriteAt per buffer
// (writeVecAt); FaultFS's files never have it, so every write they see
// goes through their fault check.
type vecWriterAt interface {
	WriteVecAt(bufs [][]byte, off int64) (int, error)
}

// writeVecAt writes bufs back to back from off: in one call where f can,
// else one WriteAt each. It returns the number of WriteAt-equivalent calls
// made (for the write_calls statistic).
func writeVecAt(f File, bufs [][]byte, off int64) (int, error) {
	if v, ok := f.(vecWriterAt); ok && len(bufs) > 1 {
		_, err := v.WriteVecAt(bufs, off)
		return 1, err
	}
	for i, b := range bufs {
		if _, err := f.WriteAt(b, off); err != nil {
			return i + 1, err
		}
		off += int64(len(b))
	}
	return len(bufs), nil
}

// OSFS returns the FS of the operating system.
func OSFS() FS { return osFS{} }

type osFS struct{}

// OpenFile opens name with os.OpenFile.
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) FreeBytes(dir string) (int64, error)         { return freeBytes(dir) }

// FreeBytes returns the bytes an unprivileged writer may still allocate on
// the OS file system holding dir (see FS.FreeBytes). The index and the
// engine use it for directories the log does not own.
func FreeBytes(dir string) (int64, error) { return freeBytes(dir) }

// ReadDir lists the entry names of dir.
func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// SyncDir fsyncs the directory itself, making entry changes durable.
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile adapts *os.File; Sync and Preallocate are OS-specific (fs_linux.go,
// fs_other.go).
type osFile struct{ f *os.File }

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Close() error                             { return o.f.Close() }
func (o osFile) Sync() error                              { return fdatasync(o.f) }

// Size returns the file size from fstat.
func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Preallocate reserves [0, size) with fallocate, or extends the file
// with a hole where fallocate is not supported.
func (o osFile) Preallocate(size int64) error {
	err := fallocate(o.f, size)
	if err == nil || !errors.Is(err, errFallocateUnsupported) {
		return err
	}
	// No fallocate: extend with a hole so that the size is right; the
	// blocks are then allocated by the writes.
	cur, err := o.Size()
	if err != nil {
		return err
	}
	if cur < size {
		return o.f.Truncate(size)
	}
	return nil
}

// errFallocateUnsupported is returned by fallocate where the OS or the file
// system has none; Preallocate then falls back to Truncate.
var errFallocateUnsupported = errors.New("wal: fallocate unsupported")
