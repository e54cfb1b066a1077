package echo

import (
	"math"

	"golang.org/x/sys/unix"
)

// CPUSample is the process's CPU time, as labkit/echo/cputime.py reads it: the total from
// CLOCK_PROCESS_CPUTIME_ID (every thread, nanosecond resolution), user and system from getrusage.
type CPUSample struct{ Total, User, Sys float64 }

// CPUNow reads this process's CPU time now.
func CPUNow() CPUSample {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	var usage unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &usage)
	seconds := func(tv unix.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return CPUSample{Total: float64(ts.Sec) + float64(ts.Nsec)/1e9, User: seconds(usage.Utime), Sys: seconds(usage.Stime)}
}

// Since is the CPU seconds spent since earlier: cpu_s, cpu_user_s, cpu_sys_s (rounded to the µs, as in Python).
func (s CPUSample) Since(earlier CPUSample) map[string]float64 {
	round := func(x float64) float64 { return math.Round(x*1e6) / 1e6 }
	return map[string]float64{
		"cpu_s":      round(s.Total - earlier.Total),
		"cpu_user_s": round(s.User - earlier.User),
		"cpu_sys_s":  round(s.Sys - earlier.Sys),
	}
}
