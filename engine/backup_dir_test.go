package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A restore into a symbolic link to an empty directory fills the directory
// it points to and keeps the link, as an operator whose data directory is
// a link to another disk expects; a link to nothing is refused, and
// nothing is written.
func TestRestoreThroughASymlink(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	q := mustQueue(t, b, "lq", DefaultQueueConfig())
	for i := range 20 {
		sendBody(t, q, fmt.Sprint("m", i))
	}
	ar := backupTo(t, b, BackupOptions{})
	b.Close()

	root := t.TempDir()
	target := filepath.Join(root, "disk", "smqd")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(bytes.NewReader(ar), link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(target, "wal")); err != nil {
		t.Fatalf("the directory the link points to holds no log: %v", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 2 {
		t.Fatalf("the restore left %d entries beside the link and the disk", len(ents)-2)
	}
	b2 := openDurableTest(t, link, clk, smallSegments)
	if got := backupBodies(t, b2, clk, "lq"); len(got) != 20 {
		t.Fatalf("%d bodies through the link, want 20", len(got))
	}
	b2.Close()

	dangling := filepath.Join(root, "nowhere")
	if err := os.Symlink(filepath.Join(root, "missing"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(bytes.NewReader(ar), dangling); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("into a link to nothing: %v", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 3 {
		t.Fatalf("the refused restore left %d entries", len(ents)-3)
	}
}

// A restore onto a mount point is refused before anything is written: it
// would write the whole backup beside it, on the parent's file system, and
// then fail to rename it into place.
func TestRestoreRefusesAMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	mustQueue(t, b, "mq", DefaultQueueConfig())
	ar := backupTo(t, b, BackupOptions{})
	b.Close()
	root := t.TempDir()
	mnt := filepath.Join(root, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	// A new volume is seldom empty (ext4's lost+found): the advice is
	// still the mount point's, not "not empty".
	if err := os.Mkdir(filepath.Join(mnt, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(bytes.NewReader(ar), mnt)
	if !errors.Is(err, ErrInvalidArgument) || !bytes.Contains([]byte(err.Error()), []byte("mount point")) {
		t.Fatalf("onto a mount point: %v", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 1 {
		t.Fatalf("the refused restore left %d entries beside the mount point", len(ents)-1)
	}
	// A bind mount of the same file system is not told from a directory
	// before the restore; its rename fails, and the error says why.
	src, bind := filepath.Join(root, "src"), filepath.Join(root, "bind")
	for _, d := range []string{src, bind} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("mount", "--bind", src, bind).CombinedOutput(); err == nil {
		defer syscall.Unmount(bind, syscall.MNT_DETACH)
		if _, err := Restore(bytes.NewReader(ar), bind); !errors.Is(err, ErrInvalidArgument) || !bytes.Contains([]byte(err.Error()), []byte("mount point")) {
			t.Fatalf("onto a bind mount: %v", err)
		}
		if ents, _ := os.ReadDir(root); len(ents) != 3 {
			t.Fatalf("the refused restore left %d entries beside the mounts", len(ents)-3)
		}
	} else {
		t.Logf("no bind mount here (%v: %s)", err, out)
	}
	// Inside it, as the error says, it works.
	if _, err := Restore(bytes.NewReader(ar), filepath.Join(mnt, "smqd")); err != nil {
		t.Fatal(err)
	}
}
