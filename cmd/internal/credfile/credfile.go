// Package credfile reads smqd's credentials file: access keys, one
// "<access key id> <secret>" per line; blank lines and lines starting with
// '#' are skipped. smqd writes one into its data directory on first start
// (<data-dir>/credentials, mode 0600) and reads --credentials-file; smqctl
// reads the same file to sign its requests.
package credfile

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Key is one access key.
type Key struct {
	ID, Secret string
}

// Load reads the keys of path, in file order. A file without a key is an
// error, and so is one that names a key id twice: smqd kept the last
// secret and smqctl signed with the first, so a secret rotated by
// appending a line broke smqctl (TLS audit, 2026-12-06).
func Load(path string) ([]Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []Key
	lineOf := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"<access key id> <secret>\"", path, n)
		}
		if strings.ContainsFunc(fields[0], func(r rune) bool { return r == ':' || r < ' ' || r == 0x7f }) {
			// The server refuses such an id (a ':' ends it in "MNS
			// <id>:<signature>"), naming neither the file nor the line;
			// HTTP clients refuse to send a DEL (0x7f) in a header, so no
			// request could be signed with it (fuzz audit, 2026-12-08).
			return nil, fmt.Errorf("%s:%d: key id %q must not contain ':' or control characters", path, n, fields[0])
		}
		if first, dup := lineOf[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: key id %s is on line %d already (one secret per key: replace the line to rotate it)", path, n, fields[0], first)
		}
		lineOf[fields[0]] = n
		keys = append(keys, Key{fields[0], fields[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no access key", path)
	}
	return keys, nil
}
