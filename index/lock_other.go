//go:build !unix

package index

// lockDir is a no-op where flock(2) is not available; Badger's own
// directory lock still refuses a second opener.
func lockDir(string) (unlock func(), err error) { return func() {}, nil }
