package bench

// CPU accounting over a measured window: the server's CPU time (a spawned
// daemon, or any process named by Config.ServerPID, e.g. a peer broker
// started by bench/peers.sh) read from /proc/<pid>/stat, and the load
// generator's own from getrusage(RUSAGE_SELF). Both are sampled at the
// start and at the end of the window (after the warm-up), so what the
// result reports is
//
//	server CPU per message = (utime+stime at end - at start) / messages
//	client CPU per message = (ru_utime+ru_stime at end - at start) / messages
//	cores                  = CPU time / wall time between the two samples
//
// where messages are those deleted in the window (sent, for produce).
// utime and stime in /proc/<pid>/stat are the whole thread group's, in
// clock ticks (USER_HZ); the kernel's ABI fixes USER_HZ at 100 on every
// architecture Go runs Linux on, and Go cannot ask sysconf(_SC_CLK_TCK)
// without cgo. A tick is 10 ms: over a 10 s window at one core that is
// 0.1 %. getrusage is finer (microseconds).

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat.
const userHZ = 100

// ProcCPU returns the user plus system CPU time that process pid (all its
// threads) has used so far, from /proc/<pid>/stat (Linux only).
func ProcCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("bench: no process %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// parseProcStat returns utime+stime of a /proc/<pid>/stat line. The second
// field, the command name in parentheses, may hold spaces and ')', so the
// fields are counted from the last ')': state is field 3, utime 14, stime 15.
func parseProcStat(b []byte) (time.Duration, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bench: malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, errors.New("bench: malformed utime/stime in /proc stat")
	}
	return time.Duration(ut+st) * (time.Second / userHZ), nil
}

// cpuSample is one reading of the clocks at a window's edge.
type cpuSample struct {
	wall      time.Time
	server    time.Duration
	serverOK  bool
	client    time.Duration
	clientOK  bool
	serverPID int
	others    []int // further server processes, their CPU added (Config.ServerPIDs)
}

// sampleCPU reads the wall clock, the server's CPU (pid > 0, plus that of
// the others: the nodes of a cluster) and this process's.
func sampleCPU(pid int, others ...int) cpuSample {
	s := cpuSample{wall: time.Now(), serverPID: pid, others: others}
	if pid > 0 {
		var err error
		s.server, err = ProcCPU(pid)
		s.serverOK = err == nil
		for _, o := range others {
			d, err := ProcCPU(o)
			s.server += d
			s.serverOK = s.serverOK && err == nil
		}
	}
	var err error
	s.client, err = selfCPU()
	s.clientOK = err == nil
	return s
}

// setCPU fills res's CPU figures from the samples at the window's start and
// end, per msgs messages.
func setCPU(res *Result, start, end cpuSample, msgs int64) {
	wall := end.wall.Sub(start.wall).Seconds()
	if wall <= 0 {
		return
	}
	res.CPUs = runtime.NumCPU()
	res.CPUWallS = round3(wall)
	per := func(d time.Duration) float64 {
		if msgs <= 0 {
			return 0
		}
		return round2(float64(d.Microseconds()) / float64(msgs))
	}
	// The same processes at both ends (a restarted daemon has a new PID).
	if start.serverOK && end.serverOK && start.serverPID == end.serverPID && slices.Equal(start.others, end.others) && end.server >= start.server {
		d := end.server - start.server
		res.ServerCPUS = round3(d.Seconds())
		res.ServerCores = round2(d.Seconds() / wall)
		res.ServerCPUUsPerMsg = per(d)
		res.ServerPID = end.serverPID
		if len(end.others) > 0 {
			res.ServerPIDs = append([]int{end.serverPID}, end.others...)
		}
	} else if start.serverPID > 0 {
		// Named but gone at an end (its table line said that no server
		// was named).
		res.ServerLost = start.serverPID
	}
	if start.clientOK && end.clientOK && end.client >= start.client {
		d := end.client - start.client
		res.ClientCPUS = round3(d.Seconds())
		res.ClientCores = round2(d.Seconds() / wall)
		res.ClientCPUUsPerMsg = per(d)
	}
}
