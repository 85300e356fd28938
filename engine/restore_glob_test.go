package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// RestoreDir's removal of a crashed restore's ".DIR.restoring-*" must
// remove only that: not another directory's restore (DIR or its parent
// with glob metacharacters), not a restore into DIR still running, and
// it must work when the parent's name has a '['. (review U)

func TestRestoreCleanupTakesOnlyItsOwn(t *testing.T) {
	for _, tc := range []struct{ name, dir, victim string }{
		{"star in DIR", "q*", ".qa.restoring-1"},
		{"question mark in DIR", "q?", ".qa.restoring-1"},
		{"class in DIR", "q[ab]", ".qa.restoring-1"},
		{"star in parent", "*/data", "other/.data.restoring-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			victim := filepath.Join(root, tc.victim)
			if err := os.MkdirAll(victim, 0o700); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, tc.dir)
			err := RestoreDir(dir, func(tmp string) error { return errors.New("stop here") })
			if err == nil || err.Error() != "stop here" {
				t.Fatalf("RestoreDir: %v", err)
			}
			if _, err := os.Stat(victim); err != nil {
				t.Fatalf("a restore into %s removed %s, another directory's: %v", tc.dir, tc.victim, err)
			}
		})
	}
}

func TestRestoreCleanupWithBracketInParent(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a[1")
	stale := filepath.Join(root, ".data.restoring-123")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	err := RestoreDir(filepath.Join(root, "data"), func(tmp string) error { return errors.New("stop here") })
	if err == nil || err.Error() != "stop here" {
		t.Fatalf("RestoreDir: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the crashed restore's directory is still there under a parent named a[1 (%v)", err)
	}
}

// A second restore into DIR while one runs must not remove the running
// one's directory: before the removal the second failed at the end
// ("not empty") and the first was whole.
func TestRestoreCleanupLeavesARunningRestore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	inFill, release := make(chan string), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- RestoreDir(dir, func(tmp string) error {
			if err := os.WriteFile(filepath.Join(tmp, "a"), []byte("x"), 0o600); err != nil {
				return err
			}
			inFill <- tmp
			<-release
			return os.WriteFile(filepath.Join(tmp, "b"), []byte("y"), 0o600)
		})
	}()
	tmp1 := <-inFill
	err2 := RestoreDir(dir, func(tmp string) error { return errors.New("second stops") })
	_, statErr := os.Stat(tmp1)
	close(release)
	err1 := <-first
	if statErr != nil {
		t.Fatalf("a second restore into %s removed the running one's %s (second: %v; first then: %v)", dir, tmp1, err2, err1)
	}
	if err1 != nil {
		t.Fatalf("the first restore failed: %v", err1)
	}
}
