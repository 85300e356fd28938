package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/smqd/smqd/cmd/internal/credfile"
	"github.com/smqd/smqd/server"
)

// defaultCredentialsName is the key file created in the data directory.
const defaultCredentialsName = "credentials"

// credSource says where the credentials came from.
type credSource int

const (
	credFlags     credSource = iota // --access-key-id/--access-key-secret
	credFile                        // --credentials-file
	credGenerated                   // <data-dir>/credentials, created now
	credReused                      // <data-dir>/credentials, from an earlier start
)

// resolveCredentials finds the access keys: flags, else the given file,
// else the data directory's key file, created with a random key pair on
// first start (0600, in a 0700 directory).
func resolveCredentials(c *config) (map[string]string, credSource, string, error) {
	if c.accessKeyID != "" {
		return map[string]string{c.accessKeyID: c.accessKeySecret}, credFlags, "", nil
	}
	if c.credentialsFile != "" {
		m, err := loadCredentials(c.credentialsFile)
		return m, credFile, c.credentialsFile, err
	}
	path := filepath.Join(c.dataDir, defaultCredentialsName)
	m, err := loadCredentials(path)
	if err == nil {
		return m, credReused, path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, path, err
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return nil, 0, path, fmt.Errorf("create data directory: %w", err)
	}
	id, secret, err := generateKeyPair()
	if err != nil {
		return nil, 0, path, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, 0, path, fmt.Errorf("create credentials file: %w", err)
	}
	_, werr := fmt.Fprintf(f, "# smqd access key, generated on first start. One \"<id> <secret>\" per line.\n%s %s\n", id, secret)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(path)
		return nil, 0, path, fmt.Errorf("write credentials file: %w", err)
	}
	return map[string]string{id: secret}, credGenerated, path, nil
}

const keyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// generateKeyPair returns a random access key id ("SMQD" + 16 characters)
// and a 30-character secret, like the service's key shapes.
func generateKeyPair() (id, secret string, err error) {
	r := func(n int) (string, error) {
		out := make([]byte, 0, n)
		var buf [64]byte
		for len(out) < n {
			if _, err := rand.Read(buf[:]); err != nil {
				return "", err
			}
			for _, c := range buf {
				// Rejection sampling keeps the characters uniform.
				if int(c) < 256/len(keyAlphabet)*len(keyAlphabet) && len(out) < n {
					out = append(out, keyAlphabet[int(c)%len(keyAlphabet)])
				}
			}
		}
		return string(out), nil
	}
	if id, err = r(16); err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	if secret, err = r(30); err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	return "SMQD" + id, secret, nil
}

// loadCredentials reads a credentials file (package credfile) into a map.
func loadCredentials(path string) (map[string]string, error) {
	keys, err := credfile.Load(path)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k.ID] = k.Secret
	}
	return m, nil
}

// worldReadable reports whether others than the owner may read path.
func worldReadable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().Perm()&0o077 != 0
}

// rereadCredentials reads the credentials file again (SIGHUP) and gives
// its keys to the server; it returns the keys in force, which stay the
// old ones if the file cannot be read or holds no key.
func rereadCredentials(path string, old map[string]string, srv *server.Server, log *slog.Logger) (map[string]string, error) {
	m, err := loadCredentials(path)
	if err == nil {
		err = srv.SetCredentials(m)
	}
	if err != nil {
		log.Error("credentials not reloaded: the previous keys stay in force", "path", path, "err", err)
		return old, err
	}
	added, removed, changed := 0, 0, 0
	for id, secret := range m {
		if was, ok := old[id]; !ok {
			added++
		} else if was != secret {
			changed++
		}
	}
	for id := range old {
		if _, ok := m[id]; !ok {
			removed++
		}
	}
	log.Info("credentials reloaded", "path", path, "keys", len(m), "added", added, "removed", removed, "secret_changed", changed)
	warnIfShared(log, path, "credentials file")
	return m, nil
}
