package echo

import (
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPUSample is the process's CPU time, as labkit/echo/cputime.py reads it: the total from
// CLOCK_PROCESS_CPUTIME_ID (every thread, nanosecond resolution), user and system from getrusage;
// and RWSyscalls, the read and write system calls the process has made (-1: unknown).
type CPUSample struct {
	Total, User, Sys float64
	RWSyscalls       int64
}

// CPUNow reads this process's CPU time now.
func CPUNow() CPUSample {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	var usage unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &usage)
	seconds := func(tv unix.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return CPUSample{Total: float64(ts.Sec) + float64(ts.Nsec)/1e9, User: seconds(usage.Utime), Sys: seconds(usage.Stime),
		RWSyscalls: rwSyscalls()}
}

// rwSyscalls is syscr + syscw of /proc/self/io: the read(2)/write(2) family's calls of every thread, which
// is how Go reads and writes its sockets (sendmsg and recvmsg, which Python's grpcio uses, are not counted
// there, so the Python side reports none). -1 without /proc.
func rwSyscalls() int64 {
	text, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	return ParseRWSyscalls(string(text))
}

// ParseRWSyscalls sums the syscr and syscw lines of a /proc/<pid>/io text; -1 when either is missing.
func ParseRWSyscalls(text string) int64 {
	var total int64
	found := 0
	for _, line := range strings.Split(text, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "syscr" && key != "syscw") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return -1
		}
		total += n
		found++
	}
	if found != 2 {
		return -1
	}
	return total
}

// Since is the CPU seconds spent since earlier: cpu_s, cpu_user_s, cpu_sys_s (rounded to the µs, as in Python),
// and rw_syscalls when both samples know them.
func (s CPUSample) Since(earlier CPUSample) map[string]float64 {
	round := func(x float64) float64 { return math.Round(x*1e6) / 1e6 }
	since := map[string]float64{
		"cpu_s":      round(s.Total - earlier.Total),
		"cpu_user_s": round(s.User - earlier.User),
		"cpu_sys_s":  round(s.Sys - earlier.Sys),
	}
	if s.RWSyscalls >= 0 && earlier.RWSyscalls >= 0 {
		since["rw_syscalls"] = float64(s.RWSyscalls - earlier.RWSyscalls)
	}
	return since
}
