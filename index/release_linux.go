//go:build linux

package index

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// dropTablePages tells the kernel that this process no longer needs its
// resident pages of the table files (*.sst) in absDir whose ids are in
// pinned, and returns the bytes of mappings advised.
//
// Badger reads tables through shared file mappings, so after a full scan
// every page of every table counts towards the process's RSS (as RssFile)
// although nothing will read most of them again soon. MADV_DONTNEED on a
// shared file mapping only unmaps the pages from this process: they stay in
// the page cache (dirty ones stay dirty) and a later access maps them back
// without I/O. It would destroy data if the range belonged to anonymous
// memory, so the caller must guarantee that every mapping it names stays
// mapped during the call: pinned holds only tables that an open Badger
// iterator references (a referenced table is never unmapped).
// Errors are ignored: this is an optimization only.
func dropTablePages(absDir string, pinned map[uint64]struct{}) int64 {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	prefix := []byte(absDir + string(os.PathSeparator))
	var advised int64
	for line := range bytes.Lines(maps) {
		// "start-end perms offset dev inode   path"
		line = bytes.TrimRight(line, "\n")
		i := bytes.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := line[i:]
		if !bytes.HasPrefix(path, prefix) || !bytes.HasSuffix(path, []byte(tableExt)) {
			continue // not ours, or " (deleted)"
		}
		name := filepath.Base(string(path))
		id, err := strconv.ParseUint(name[:len(name)-len(tableExt)], 10, 64)
		if err != nil {
			continue
		}
		if _, ok := pinned[id]; !ok {
			continue
		}
		dash := bytes.IndexByte(line, '-')
		sp := bytes.IndexByte(line, ' ')
		if dash < 0 || sp < dash {
			continue
		}
		start, err1 := strconv.ParseUint(string(line[:dash]), 16, 64)
		end, err2 := strconv.ParseUint(string(line[dash+1:sp]), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
		if errno == 0 {
			advised += int64(end - start)
		}
	}
	return advised
}
