package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
)

// Private files. smqd's data directory holds the messages and, by default,
// the access key, so everything under it is the owner's alone:
//
//   - the process umask is 077 (unix, perms_unix.go), so every file and
//     directory smqd or its libraries (the WAL, Badger) create is 0600/0700
//     whatever mode they ask for;
//   - the data directory is created 0700 in every auth mode, and the
//     generated credentials file 0600 (credentials.go);
//   - an existing data directory, credentials file or TLS key that others
//     may read is reported at start (not changed: the operator decides).

// ensureDataDir creates dir 0700 if it does not exist, and warns if it
// exists with permissions for others.
func ensureDataDir(dir string, log *slog.Logger) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("data directory %s is not a directory", dir)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		log.Warn("the data directory is open to other users; it holds the messages and the access key: chmod 700 it", "path", dir, "mode", fmt.Sprintf("%#o", perm))
	}
	return nil
}

// warnIfShared logs a warning when others than the owner may read path.
func warnIfShared(log *slog.Logger, path, what string) {
	if worldReadable(path) {
		log.Warn("the "+what+" is readable by other users; chmod 600 it", "path", path)
	}
}
