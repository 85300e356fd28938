//go:build !unix

package engine

// lockDataDir relies on the index's own directory lock where flock(2) is
// not available.
func lockDataDir(string) (func(), error) { return func() {}, nil }

// isMountPoint is false where stat(2)'s device is not known; a restore onto
// a mount point then fails at its rename.
func isMountPoint(string) bool { return false }
