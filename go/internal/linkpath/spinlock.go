package linkpath

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// spinLock guards what the data-path threads share. A sync.Mutex would park a waiting
// goroutine in Go's scheduler, and a parked goroutine locked to its thread is handed back to
// that thread through other threads of the runtime, several context switches later. Every
// holder is a data-path thread with a critical section of microseconds, so waiting spins,
// yielding the CPU (to a holder preempted on it) now and then.
type spinLock struct{ held atomic.Bool }

func (l *spinLock) Lock() {
	for spins := 0; !l.held.CompareAndSwap(false, true); spins++ {
		if spins%64 == 63 {
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}

func (l *spinLock) Unlock() { l.held.Store(false) }
