package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPreAuthRSS measures the daemon's resident memory (VmRSS of the
// process, Linux) held by n unauthenticated connections that each send
// request headers declaring an 8 MiB body and then nothing, as in the
// report that led to authenticating before the body is read: 250 such
// connections held 2 GiB. It reports the total RSS growth and the growth
// per connection once RSS has settled. SMQD_BENCH_BIN selects another
// build of smqd to measure (e.g. an older one); by default this package is
// built. Run it once per size:
//
//	go test -run '^$' -bench BenchmarkPreAuthRSS -benchtime 1x ./cmd/smqd/
func BenchmarkPreAuthRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc/<pid>/status")
	}
	bin := os.Getenv("SMQD_BENCH_BIN")
	if bin == "" {
		var err error
		if bin, err = buildDaemon(b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
	const declared = 8 << 20
	for _, n := range []int{250, 2000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				d := startBinary(b, bin)
				pid := d.cmd.Process.Pid
				addr := strings.TrimPrefix(d.endpoint, "http://")
				base := settledRSS(b, pid)
				conns := make([]net.Conn, 0, n)
				head := fmt.Sprintf("POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n", declared)
				for k := 0; k < n; k++ {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					conns = append(conns, c)
					if _, err := c.Write([]byte(head)); err != nil {
						b.Fatal(err)
					}
				}
				rss := settledRSS(b, pid)
				grown := rss - base
				b.ReportMetric(float64(rss)/(1<<20), "RSS-MiB")
				b.ReportMetric(float64(grown)/(1<<20), "RSS-growth-MiB")
				b.ReportMetric(float64(grown)/float64(n)/1024, "KiB/conn")
				for _, c := range conns {
					c.Close()
				}
				d.stop(b)
			}
		})
	}
}

// settledRSS samples the RSS of pid every 100 ms until it has not grown by
// more than 1% over the last second (at most 30 s) and returns it.
func settledRSS(b *testing.B, pid int) int64 {
	b.Helper()
	var hist []int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		hist = append(hist, vmRSS(b, pid))
		if len(hist) > 10 {
			old, now := hist[len(hist)-11], hist[len(hist)-1]
			if now <= old+old/100 || time.Now().After(deadline) {
				return now
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// vmRSS returns the resident set size of pid in bytes.
func vmRSS(b *testing.B, pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
