package index

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartupScan measures the start-up path as the engine runs it, in a
// fresh process: Open, then Messages over every message, then the process's
// RSS. It builds a store of 1,000,000 messages (and, without -race,
// 10,000,000), closes it, and re-runs this test binary on it
// (TestStartupScanChild). Not in the -short suite.
func TestStartupScan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stores of millions of messages")
	}
	sizes := []int{1_000_000}
	if !raceEnabled {
		sizes = append(sizes, 10_000_000)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("keys=%d", n), func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			s := settledStore(t, dir, n)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("built %d messages in %v; %d MiB on disk", n, time.Since(start), dirBytes(dir)>>20)
			// Run 1 after the build, run 2 again (page cache warm either
			// way: the build just wrote the tables).
			const runs = 2
			for run := 1; run <= runs; run++ {
				cmd := exec.Command(os.Args[0], "-test.run=^TestStartupScanChild$", "-test.v")
				cmd.Env = append(os.Environ(), "INDEX_STARTUP_DIR="+dir)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("child: %v\n%s", err, out)
				}
				var res string
				for _, line := range strings.Split(string(out), "\n") {
					if i := strings.Index(line, "RESULT "); i >= 0 {
						res = line[i+len("RESULT "):]
					}
				}
				if res == "" {
					t.Fatalf("child printed no result:\n%s", out)
				}
				t.Logf("run %d: %s", run, res)
				fields := map[string]string{}
				for _, kv := range strings.Fields(res) {
					k, v, _ := strings.Cut(kv, "=")
					fields[k] = v
				}
				if got, _ := strconv.Atoi(fields["messages"]); got != n {
					t.Fatalf("child scanned %s messages, want %d", fields["messages"], n)
				}
				// The index's share of the broker's ~100 MiB budget with
				// 1,000,000 messages.
				rss, _ := strconv.Atoi(fields["VmRSS_KiB"])
				if n == 1_000_000 && run == runs && !raceEnabled && rss > 64<<10 {
					t.Errorf("RSS after Open+Messages is %d KiB", rss)
				}
			}
		})
	}
}

// TestStartupScanChild is TestStartupScan's fresh process.
func TestStartupScanChild(t *testing.T) {
	dir := os.Getenv("INDEX_STARTUP_DIR")
	if dir == "" {
		t.Skip("run by TestStartupScan")
	}
	start := time.Now()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opened := time.Since(start)
	start = time.Now()
	n := 0
	if err := s.Messages(func(q, seq uint64, v []byte) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	scanned := time.Since(start)
	st := procStatus("VmRSS", "RssAnon", "RssFile", "VmHWM")
	t.Logf("RESULT messages=%d open=%v scan=%v rate=%.2fM/s VmRSS_KiB=%d RssAnon_KiB=%d RssFile_KiB=%d VmHWM_KiB=%d",
		n, opened.Round(time.Millisecond), scanned.Round(time.Millisecond), float64(n)/scanned.Seconds()/1e6,
		st["VmRSS"], st["RssAnon"], st["RssFile"], st["VmHWM"])
}
