package wal

// memfs.go is an in-memory FS for tests (of this package and of the engine)
// that knows which bytes are durable, so that CrashClone can simulate a power
// loss: file data survives only as far as File.Sync made it durable, and
// directory entries (create, rename, remove) only as far as SyncDir did.
//
// It can also simulate a full disk: SetCapacity bounds the bytes all files
// may occupy (a file occupies its size, preallocated space included, as with
// fallocate); a write, Preallocate or Truncate that would grow past it fails
// with ENOSPC and changes nothing, and FreeBytes reports what is left.
//
// Locking: MemFS.mu guards the two name tables and each file's linked flag;
// each memFile has its own mutex for its contents. Lock order: MemFS.mu
// before memFile.mu. The space counters are atomics.

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that tracks per file which bytes were synced. It is
// a test tool: it is slow for large files and keeps unsynced writes in memory
// until the next Sync. Preallocated space costs no memory.
type MemFS struct {
	mu      sync.Mutex
	files   map[string]*memFile // the current namespace
	durable map[string]*memFile // the namespace as of the last SyncDir of each dir
	dirs    map[string]bool     // directories made by MkdirAll

	capacity atomic.Int64 // bytes the files may occupy; <= 0: unlimited
	used     atomic.Int64 // sum of the sizes of the linked files

	syncFail   atomic.Pointer[error] // FailSyncsLosingWrites: the error every Sync returns
	writeDelay atomic.Int64          // SetWriteDelay: nanoseconds each WriteAt sleeps first
}

// SetWriteDelay makes every WriteAt sleep d before it writes (a slow disk:
// a log's writes then trail its appends), taking no lock while it sleeps.
// 0 turns it off.
func (m *MemFS) SetWriteDelay(d time.Duration) { m.writeDelay.Store(int64(d)) }

// FailSyncsLosingWrites makes every File.Sync fail with err as Linux does
// after a failed writeback: the writes it was to make durable are dropped
// from what survives a crash (CrashClone), though reads still see them
// (the kernel marks the pages clean), and no later Sync makes them
// durable. nil disarms it.
func (m *MemFS) FailSyncsLosingWrites(err error) {
	if err == nil {
		m.syncFail.Store(nil)
		return
	}
	m.syncFail.Store(&err)
}

// unlimitedFree is what FreeBytes reports for a MemFS without a capacity.
const unlimitedFree = 1 << 50

// memState is one version of a file: bytes [0, len(data)) are stored, bytes
// [len(data), size) read as zeros (preallocated).
type memState struct {
	data []byte
	size int64
}

// memOp is one unsynced change, replayed in order by Sync and CrashClone.
type memOp struct {
	off  int64
	data []byte // a write of data at off; nil means "set the size to off"
}

type memFile struct {
	fs      *MemFS
	mu      sync.Mutex
	cur     memState // what reads see
	synced  memState // what survives a crash
	pending []memOp  // changes since the last Sync, oldest first
	// linked: the file has a name, so its size counts in fs.used (set
	// under fs.mu and mu; read under either).
	linked bool
}

// NewMemFS returns an empty in-memory FS.
func NewMemFS() *MemFS {
	return &MemFS{files: map[string]*memFile{}, durable: map[string]*memFile{}, dirs: map[string]bool{}}
}

// OpenFile implements FS. Supported flags: O_RDONLY, O_RDWR, O_WRONLY,
// O_CREATE, O_EXCL, O_TRUNC.
func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[filepath.Dir(name)] {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
	}
	f := m.files[name]
	switch {
	case f == nil && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
	case f != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EEXIST}
	case f == nil:
		f = &memFile{fs: m, linked: true}
		m.files[name] = f
	}
	// A new file exists in the current namespace only; it survives a crash
	// once SyncDir(dir) has run (see CrashClone).
	h := &memHandle{f: f, name: name, readOnly: flag&(os.O_RDWR|os.O_WRONLY) == 0}
	if flag&os.O_TRUNC != 0 {
		if err := h.Truncate(0); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[name]
	if f == nil {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOENT}
	}
	delete(m.files, name)
	m.unlinkLocked(f)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[oldname]
	if f == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOENT}
	}
	delete(m.files, oldname)
	if g := m.files[newname]; g != nil && g != f {
		m.unlinkLocked(g) // replaced
	}
	m.files[newname] = f
	return nil
}

// unlinkLocked stops counting f's size once no name refers to it (space is
// freed at unlink, not at the last close: a simplification). m.mu is held.
func (m *MemFS) unlinkLocked(f *memFile) {
	for _, g := range m.files {
		if g == f {
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.linked {
		f.linked = false
		m.used.Add(-f.cur.size)
	}
}

// SetCapacity bounds the bytes all files of m may occupy; n <= 0 removes
// the bound. Lowering it below what is used fails no existing data: only
// later growth fails (ENOSPC).
func (m *MemFS) SetCapacity(n int64) { m.capacity.Store(n) }

// Used returns the bytes the files of m occupy (their sizes).
func (m *MemFS) Used() int64 { return m.used.Load() }

// FreeBytes implements FS: capacity minus used, never negative; a very
// large number without a capacity.
func (m *MemFS) FreeBytes(dir string) (int64, error) {
	m.mu.Lock()
	ok := m.dirs[filepath.Clean(dir)]
	m.mu.Unlock()
	if !ok {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: syscall.ENOENT}
	}
	c := m.capacity.Load()
	if c <= 0 {
		return unlimitedFree, nil
	}
	return max(0, c-m.used.Load()), nil
}

// resizeLocked accounts for f's size changing from its current one to n.
// Growth past the capacity fails with ENOSPC and accounts nothing. f.mu is
// held.
func (f *memFile) resizeLocked(op, name string, n int64) error {
	delta := n - f.cur.size
	if delta == 0 || !f.linked {
		return nil
	}
	m := f.fs
	if used := m.used.Add(delta); delta > 0 {
		if c := m.capacity.Load(); c > 0 && used > c {
			m.used.Add(-delta)
			return &os.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
		}
	}
	return nil
}

// ReadDir implements FS; names are sorted.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: syscall.ENOENT}
	}
	var names []string
	for name := range m.files {
		if filepath.Dir(name) == dir {
			names = append(names, filepath.Base(name))
		}
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS. Directories are durable at once.
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; ; d = filepath.Dir(d) {
		m.dirs[d] = true
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// SyncDir implements FS: the entries of dir become durable as they are now.
func (m *MemFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.durable {
		if filepath.Dir(name) == dir && m.files[name] == nil {
			delete(m.durable, name)
		}
	}
	for name, f := range m.files {
		if filepath.Dir(name) == dir {
			m.durable[name] = f
		}
	}
	return nil
}

// CrashClone returns a copy of m as it would be found after a power loss:
// only durable directory entries, and per file only the synced data plus,
// if rnd is non-nil, a random prefix of the unsynced changes (the last one
// possibly torn: a random prefix of its bytes). With rnd == nil the clone
// holds exactly the synced data. m is not changed and stays usable.
func (m *MemFS) CrashClone(rnd *rand.Rand) *MemFS {
	return CrashCloneAll(rnd, m)[0]
}

// CrashCloneAll is CrashClone of several file systems at one instant, as
// when the machines of a cluster lose power together: every one is frozen
// before any is copied, so no clone holds what another machine learned
// after the instant of a second clone (cloning them one after another does
// not model a power loss: a member's later clone may hold a commit that
// rests on writes the earlier clones lost).
func CrashCloneAll(rnd *rand.Rand, fss ...*MemFS) []*MemFS {
	return cloneAll(fss, func(m *MemFS) map[string]*memFile { return m.durable }, func(f *memFile) *memFile { return f.crashCopy(rnd) })
}

// cloneAll copies fss at one instant: each file system's names in
// names(m), each file as copyFile makes it (called with its mu held).
func cloneAll(fss []*MemFS, names func(*MemFS) map[string]*memFile, copyFile func(*memFile) *memFile) []*MemFS {
	for _, m := range fss {
		m.mu.Lock()
	}
	defer func() {
		for _, m := range fss {
			m.mu.Unlock()
		}
	}()
	// Lock every file first: the clone is one instant across files, like a
	// power loss (handles lock only one file at a time, so no deadlock).
	locked := map[*memFile]bool{}
	for _, m := range fss {
		for _, f := range names(m) {
			if !locked[f] {
				locked[f] = true
				f.mu.Lock()
			}
		}
	}
	defer func() {
		for f := range locked {
			f.mu.Unlock()
		}
	}()
	out := make([]*MemFS, len(fss))
	for i, m := range fss {
		c := NewMemFS()
		c.capacity.Store(m.capacity.Load())
		for d := range m.dirs {
			c.dirs[d] = true
		}
		clones := map[*memFile]*memFile{} // a file under two names stays one file
		for name, f := range names(m) {
			cf := clones[f]
			if cf == nil {
				cf = copyFile(f)
				cf.fs, cf.linked = c, true
				c.used.Add(cf.cur.size)
				clones[f] = cf
			}
			c.files[name] = cf
			c.durable[name] = cf
		}
		out[i] = c
	}
	return out
}

// KillCloneAll returns copies of fss as a restart finds them after every
// process using them was killed at one instant (kill -9, an OOM kill): the
// operating system keeps what they had written, so every write and every
// name survives, synced or not; only what the processes held in their own
// memory is lost. The clones are taken at one instant across fss, as
// CrashCloneAll's are. fss are not changed and stay usable.
func KillCloneAll(fss ...*MemFS) []*MemFS {
	return cloneAll(fss, func(m *MemFS) map[string]*memFile { return m.files }, func(f *memFile) *memFile {
		st := memState{data: slices.Clone(f.cur.data), size: f.cur.size}
		return &memFile{cur: st, synced: memState{data: slices.Clone(st.data), size: st.size}}
	})
}

// crashCopy builds the post-crash version of f; f.mu is held.
func (f *memFile) crashCopy(rnd *rand.Rand) *memFile {
	st := memState{data: slices.Clone(f.synced.data), size: f.synced.size}
	if rnd != nil && len(f.pending) > 0 {
		k := rnd.IntN(len(f.pending) + 1)
		for _, op := range f.pending[:k] {
			st.apply(op)
		}
		if k < len(f.pending) && f.pending[k].data != nil && rnd.IntN(2) == 0 {
			op := f.pending[k]
			op.data = op.data[:rnd.IntN(len(op.data)+1)] // a torn write
			st.apply(op)
		}
	}
	return &memFile{cur: st, synced: memState{data: slices.Clone(st.data), size: st.size}}
}

// Files returns the current file names under dir (for tests).
func (m *MemFS) Files(dir string) []string {
	names, _ := m.ReadDir(dir)
	return names
}

// apply replays one change onto s.
func (s *memState) apply(op memOp) {
	if op.data == nil {
		s.setSize(op.off)
		return
	}
	end := op.off + int64(len(op.data))
	s.grow(end)
	copy(s.data[op.off:end], op.data)
	if end > s.size {
		s.size = end
	}
}

// grow makes data at least n bytes long, zero-filling the new part.
func (s *memState) grow(n int64) {
	l := int64(len(s.data))
	if n <= l {
		return
	}
	if int64(cap(s.data)) >= n {
		s.data = s.data[:n]
	} else {
		nd := make([]byte, n, max(n, 2*l))
		copy(nd, s.data)
		s.data = nd
	}
	clear(s.data[l:n])
}

// setSize truncates or extends (with zeros, without storing them) to n.
func (s *memState) setSize(n int64) {
	if n < int64(len(s.data)) {
		s.data = s.data[:n]
	}
	s.size = n
}

// memHandle is an open MemFS file. It keeps working after its name is
// removed, like a POSIX file descriptor.
type memHandle struct {
	f        *memFile
	name     string
	readOnly bool
	mu       sync.Mutex // guards closed
	closed   bool
}

// check fails on a closed handle, or a write through a read-only one.
func (h *memHandle) check(write bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &os.PathError{Op: "use", Path: h.name, Err: fs.ErrClosed}
	}
	if write && h.readOnly {
		return &os.PathError{Op: "write", Path: h.name, Err: syscall.EBADF}
	}
	return nil
}

// ReadAt reads the current contents; preallocated space reads as zeros.
func (h *memHandle) ReadAt(p []byte, off int64) (int, error) {
	if err := h.check(false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: h.name, Err: syscall.EINVAL}
	}
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= f.cur.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.cur.size-off))
	stored := 0
	if off < int64(len(f.cur.data)) {
		stored = copy(p[:n], f.cur.data[off:])
	}
	clear(p[stored:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt changes the current contents and queues the change as unsynced.
func (h *memHandle) WriteAt(p []byte, off int64) (int, error) {
	if err := h.check(true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: h.name, Err: syscall.EINVAL}
	}
	// The op keeps its own copy: CrashClone may replay it after later
	// writes changed the same bytes of cur.
	op := memOp{off: off, data: slices.Clone(p)}
	if op.data == nil {
		op.data = []byte{}
	}
	if d := h.f.fs.writeDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if end := off + int64(len(p)); end > h.f.cur.size {
		if err := h.f.resizeLocked("write", h.name, end); err != nil {
			return 0, err
		}
	}
	h.f.cur.apply(op)
	h.f.pending = append(h.f.pending, op)
	return len(p), nil
}

// Sync makes every queued change of the file durable.
func (h *memHandle) Sync() error {
	if err := h.check(false); err != nil {
		return err
	}
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.fs.syncFail.Load(); p != nil {
		f.pending = nil // lost: see FailSyncsLosingWrites
		return &os.PathError{Op: "sync", Path: h.name, Err: *p}
	}
	// Replaying the pending ops costs O(bytes written), not O(file size).
	for _, op := range f.pending {
		f.synced.apply(op)
	}
	f.pending = nil
	return nil
}

// SyncAll makes every queued change of every file durable, as syncfs(2)
// does for a file system (SharedSyncFS over a MemFS); like Sync, it fails
// and loses the writes under FailSyncsLosingWrites. The namespace becomes
// durable only through SyncDir, as with Sync.
func (m *MemFS) SyncAll() error {
	m.mu.Lock()
	files := make([]*memFile, 0, len(m.files))
	for _, f := range m.files {
		files = append(files, f)
	}
	m.mu.Unlock()
	var failed error
	for _, f := range files {
		f.mu.Lock()
		if p := m.syncFail.Load(); p != nil {
			failed = &os.PathError{Op: "syncfs", Path: "memfs", Err: *p}
		} else {
			for _, op := range f.pending {
				f.synced.apply(op)
			}
		}
		f.pending = nil // made durable, or lost with the failure
		f.mu.Unlock()
	}
	return failed
}

// Truncate sets the size; durable at the next Sync.
func (h *memHandle) Truncate(size int64) error {
	if err := h.check(true); err != nil {
		return err
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if err := h.f.resizeLocked("truncate", h.name, size); err != nil {
		return err
	}
	op := memOp{off: size}
	h.f.cur.apply(op)
	h.f.pending = append(h.f.pending, op)
	return nil
}

// Preallocate grows the size without storing zeros; durable at the next Sync.
func (h *memHandle) Preallocate(size int64) error {
	if err := h.check(true); err != nil {
		return err
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if size <= h.f.cur.size {
		return nil
	}
	if err := h.f.resizeLocked("fallocate", h.name, size); err != nil {
		return err
	}
	op := memOp{off: size}
	h.f.cur.apply(op)
	h.f.pending = append(h.f.pending, op)
	return nil
}

// Size returns the current size.
func (h *memHandle) Size() (int64, error) {
	if err := h.check(false); err != nil {
		return 0, err
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.cur.size, nil
}

// Close invalidates the handle (the file lives on).
func (h *memHandle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &os.PathError{Op: "close", Path: h.name, Err: fs.ErrClosed}
	}
	h.closed = true
	return nil
}
