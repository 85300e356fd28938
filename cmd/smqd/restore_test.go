package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/archive"
)

func TestRestoreCommand(t *testing.T) {
	src := t.TempDir()
	b, err := engine.Open(engine.Options{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateQueue("rq", engine.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue("rq")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("a")}, {Body: []byte("b")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, defaultCredentialsName), []byte("id secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ar bytes.Buffer
	if _, err := b.Backup(&ar, engine.BackupOptions{Files: backupFiles}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	file := filepath.Join(t.TempDir(), "b.smqd")
	if err := os.WriteFile(file, ar.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	restore := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"restore"}, args...), func(string) string { return "" }, &out, &errb, nil)
		return code, out.String(), errb.String()
	}
	dst := filepath.Join(t.TempDir(), "data")
	code, out, errs := restore("--from", file, "--data-dir", dst)
	if code != 0 || !strings.Contains(out, "checked: 1 queues, 2 messages recovered") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if data, err := os.ReadFile(filepath.Join(dst, defaultCredentialsName)); err != nil || string(data) != "id secret\n" {
		t.Fatalf("credentials: %q %v", data, err)
	}
	// Refused: into a directory in use, a missing or damaged backup, no --from.
	if code, _, errs := restore("--from", file, "--data-dir", dst); code != 1 || !strings.Contains(errs, "not empty") {
		t.Errorf("into a used directory: exit %d: %s", code, errs)
	}
	if code, _, _ := restore("--from", filepath.Join(t.TempDir(), "none"), "--data-dir", filepath.Join(t.TempDir(), "x")); code != 1 {
		t.Errorf("a missing file: exit %d", code)
	}
	cut := filepath.Join(t.TempDir(), "cut.smqd")
	os.WriteFile(cut, ar.Bytes()[:ar.Len()-3], 0o600)
	nd := filepath.Join(t.TempDir(), "y")
	if code, _, errs := restore("--from", cut, "--data-dir", nd); code != 1 || !strings.Contains(errs, "damaged") {
		t.Errorf("a cut backup: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(nd); !os.IsNotExist(err) {
		t.Errorf("a failed restore left its directory: %v", err)
	}
	if code, _, _ := restore("--data-dir", nd); code != 2 {
		t.Errorf("no --from: exit %d", code)
	}
	// The check opens with the sizes given (those smqd will start with):
	// a bad one is a usage error, and one that does not fit the free
	// space says which flags set it (docs audit: the hint named flags
	// restore did not have).
	if code, _, errs := restore("--from", file, "--data-dir", nd, "--wal-segment-bytes", "200000"); code != 2 || !strings.Contains(errs, "--wal-segment-bytes must be") {
		t.Errorf("a bad segment size: exit %d: %s", code, errs)
	}
	if code, _, errs := restore("--from", file, "--data-dir", nd, "--free-space-reserve", "1000000000000000000"); code != 1 || !strings.Contains(errs, "restore again with the values smqd will start with") {
		t.Errorf("a check that does not fit the free space: exit %d: %s", code, errs)
	}
	// The daemon's variables count as its flags do: SMQD_DATA_DIR, and
	// the sizes (an invalid one refused as the flag's would be).
	env := map[string]string{"SMQD_DATA_DIR": nd, "SMQD_WAL_SEGMENT_BYTES": "200000"}
	var eo, ee bytes.Buffer
	if code := run(context.Background(), []string{"restore", "--from", file}, func(k string) string { return env[k] }, &eo, &ee, nil); code != 2 || !strings.Contains(ee.String(), `SMQD_WAL_SEGMENT_BYTES="200000": --wal-segment-bytes must be`) {
		t.Fatalf("SMQD_WAL_SEGMENT_BYTES=200000: exit %d\n%s", code, ee.String())
	}
	env["SMQD_WAL_SEGMENT_BYTES"], env["SMQD_INDEX_MEMTABLE_BYTES"] = "131072", "2097152"
	eo.Reset()
	if code := run(context.Background(), []string{"restore", "--from", file}, func(k string) string { return env[k] }, &eo, &ee, nil); code != 0 || !strings.Contains(eo.String(), "checked: 1 queues, 2 messages recovered") {
		t.Fatalf("restore with SMQD_DATA_DIR: exit %d\n%s\n%s", code, eo.String(), ee.String())
	}
	nd = filepath.Join(t.TempDir(), "n2")
	if code, out, errs := restore("--from", file, "--data-dir", nd, "--wal-segment-bytes", "131072", "--index-memtable-bytes", "2097152"); code != 0 || !strings.Contains(out, "checked: 1 queues, 2 messages recovered") {
		t.Errorf("smaller sizes: exit %d\n%s\n%s", code, out, errs)
	}
	os.RemoveAll(nd)
	// A single node's backup is not a cluster's, and a member must be one
	// of the peers.
	peers := "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"
	if code, _, errs := restore("--from", file, "--data-dir", nd, "--node-id", "1", "--cluster-peers", peers); code != 1 || !strings.Contains(errs, "single node's backup") {
		t.Errorf("a single node's backup as a cluster's: exit %d: %s", code, errs)
	}
	if code, _, errs := restore("--from", file, "--data-dir", nd, "--node-id", "4", "--cluster-peers", peers); code != 2 || !strings.Contains(errs, "not one of --cluster-peers") {
		t.Errorf("a member not among the peers: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(nd); !os.IsNotExist(err) {
		t.Errorf("a refused restore left its directory: %v", err)
	}
}

// A backup whose frames are whole and whose log records verify, but whose
// last record holds what no engine record is, restores and then fails its
// check: the restore exits 1 and leaves no directory that
// holds it, as any failed restore (a retry found it "not empty"), and an
// empty directory it was given stays, empty.
func TestRestoreCheckFailureLeavesNothing(t *testing.T) {
	src := t.TempDir()
	b, err := engine.Open(engine.Options{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	b.CreateQueue("rq", engine.DefaultQueueConfig())
	q, _ := b.Queue("rq")
	for range 20 {
		if _, err := q.Send([]engine.SendEntry{{Body: bytes.Repeat([]byte("m"), 512)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var ar bytes.Buffer
	if _, err := b.Backup(&ar, engine.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// The same archive, the last record of its first log segment
	// spoiled, its frames checksummed anew.
	rd, err := archive.NewReader(&ar)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	aw, err := archive.NewWriter(&out, rd.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	flipped := false
	for {
		h, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rd)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "wal/") && !flipped && len(data) > 4096 {
			start, _ := strconv.ParseUint(strings.TrimSuffix(path.Base(h.Name), ".wal"), 16, 64)
			spoilLastRecord(t, data, start)
			flipped = true
		}
		if err := aw.Create(h); err != nil {
			t.Fatal(err)
		}
		if _, err := aw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	if !flipped {
		t.Fatal("no log segment to damage")
	}
	file := filepath.Join(t.TempDir(), "bad.smqd")
	os.WriteFile(file, out.Bytes(), 0o600)
	for _, made := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "data")
		if made {
			os.Mkdir(dst, 0o700)
		}
		var o, e bytes.Buffer
		code := run(context.Background(), []string{"restore", "--from", file, "--data-dir", dst}, func(string) string { return "" }, &o, &e, nil)
		if code != 1 || !strings.Contains(e.String(), "does not open") {
			t.Fatalf("exit %d\n%s\n%s", code, o.String(), e.String())
		}
		ents, err := os.ReadDir(dst)
		switch {
		case !made && !os.IsNotExist(err):
			t.Errorf("the restore made %s and left it: %v", dst, err)
		case made && (err != nil || len(ents) != 0):
			t.Errorf("the given directory holds %d entries after the failed check (%v)", len(ents), err)
		}
	}
}

// spoilLastRecord overwrites the payload of the last record of a log
// segment's bytes, which start at position start, with 0xff bytes, and
// checksums it anew (wal/doc.go, "Record framing"): a record the log reads
// and the engine cannot decode.
func spoilLastRecord(t *testing.T, seg []byte, start uint64) {
	t.Helper()
	last := -1
	for off := 0; off+12 <= len(seg); {
		n := int(binary.LittleEndian.Uint32(seg[off:]))
		if seg[off+4] == 0 || off+12+n > len(seg) {
			break
		}
		last = off
		off += (12 + n + 3) &^ 3
	}
	if last < 0 {
		t.Fatal("no record in the segment")
	}
	n := int(binary.LittleEndian.Uint32(seg[last:]))
	seg[last+5] = 0 // not compressed
	payload := seg[last+12 : last+12+n]
	for i := range payload {
		payload[i] = 0xff
	}
	var d xxhash.Digest
	d.Reset()
	var pb [8]byte
	binary.LittleEndian.PutUint64(pb[:], start+uint64(last))
	d.Write(pb[:])
	d.Write(seg[last : last+8])
	d.Write(payload)
	binary.LittleEndian.PutUint32(seg[last+8:], uint32(d.Sum64()))
}
