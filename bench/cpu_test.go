package bench

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// comm may hold spaces and parentheses; utime 250 and stime 50 ticks.
	line := "4242 (smq d) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 1000 10 18446744073709551615\n"
	d, err := parseProcStat([]byte(line))
	if err != nil || d != 3*time.Second {
		t.Fatalf("got %v %v, want 3s", d, err)
	}
	for _, bad := range []string{"", "4242 (x S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 -5 1"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestProcCPUAgreesWithRusage burns CPU in this process and reads it both
// ways: /proc/self's ticks and getrusage must tell the same story (within a
// few ticks), which also checks the USER_HZ assumption.
func TestProcCPUAgreesWithRusage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/<pid>/stat is Linux's")
	}
	p0, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s0, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for start := time.Now(); ; {
		for i := 0; i < 1e5; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if d, _ := selfCPU(); d-s0 >= 300*time.Millisecond || time.Since(start) > 20*time.Second {
			break
		}
	}
	p1, _ := ProcCPU(os.Getpid())
	s1, _ := selfCPU()
	dp, ds := p1-p0, s1-s0
	t.Logf("burnt %v by getrusage, %v by /proc (x=%d)", ds, dp, x&1)
	if ds < 300*time.Millisecond {
		t.Skip("the machine gave this test too little CPU to compare")
	}
	if diff := (dp - ds).Abs(); diff > 50*time.Millisecond+ds/5 {
		t.Fatalf("/proc says %v, getrusage %v", dp, ds)
	}
	if _, err := ProcCPU(0); err == nil {
		t.Fatal("ProcCPU(0) succeeded")
	}
}

func TestSetCPU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	start := cpuSample{wall: t0, server: 1 * time.Second, serverOK: true, client: 2 * time.Second, clientOK: true, serverPID: 7}
	end := cpuSample{wall: t0.Add(2 * time.Second), server: 3 * time.Second, serverOK: true, client: 3 * time.Second, clientOK: true, serverPID: 7}
	var res Result
	setCPU(&res, start, end, 100000)
	if res.ServerCPUS != 2 || res.ServerCores != 1 || res.ServerCPUUsPerMsg != 20 || res.ServerPID != 7 ||
		res.ClientCPUS != 1 || res.ClientCores != 0.5 || res.ClientCPUUsPerMsg != 10 || res.CPUWallS != 2 || res.CPUs < 1 {
		t.Fatalf("figures %+v", res)
	}
	// A server restarted in the window (another PID) is not measured.
	end.serverPID = 8
	res = Result{}
	setCPU(&res, start, end, 100000)
	if res.ServerCPUS != 0 || res.ServerPID != 0 || res.ClientCPUS != 1 {
		t.Fatalf("figures %+v", res)
	}
	// It says so: the table said no server process was named.
	var table bytes.Buffer
	res.Workload, res.WindowS = string(Cycle), 2
	res.WriteTable(&table)
	if !strings.Contains(table.String(), "server not measured (pid 7 exited or restarted in the window)") {
		t.Fatalf("table:\n%s", table.String())
	}
}

// TestSampleCPUSeveral checks that several server processes (the nodes of
// a cluster) are summed, and that a different set at the two ends is not
// measured.
func TestSampleCPUSeveral(t *testing.T) {
	self := os.Getpid()
	one := sampleCPU(self)
	two := sampleCPU(self, self)
	if !one.serverOK || !two.serverOK || two.server < 2*one.server {
		t.Fatalf("one %+v two %+v", one, two)
	}
	if bad := sampleCPU(self, 0); bad.serverOK {
		t.Fatalf("a missing process counted: %+v", bad)
	}
	var res Result
	end := sampleCPU(self, self)
	end.wall = two.wall.Add(time.Second)
	setCPU(&res, two, end, 10)
	if res.ServerPID != self || len(res.ServerPIDs) != 2 || res.ServerCPUS < 0 {
		t.Fatalf("figures %+v", res)
	}
	res = Result{}
	setCPU(&res, one, end, 10)
	if res.ServerPID != 0 || res.ServerCPUS != 0 {
		t.Fatalf("another set of processes measured: %+v", res)
	}
}
