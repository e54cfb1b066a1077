package linkpath

import (
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// becomeRealtime gives the calling (locked) thread exact timer wake-ups (1 ns of timer slack
// instead of 50 µs) and the largest share of the CPU a normal thread can have (nice -20), so
// that packets leave on time on a busy machine; it reports whether the priority was granted.
//
// Not SCHED_FIFO: on this project's machines (kernel 6.18, 2 CPUs shared with other work)
// real-time threads carrying 1 Gbit/s were stalled for 20-900 ms at a time inside ppoll, the
// kernel holding them back for the normal tasks they starved; nice -20 kept the worst
// lateness at a few milliseconds under the same load.
func becomeRealtime() bool {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -20) == nil
}

// waker wakes a sleeping scheduler thread: an eventfd that ppoll waits on with a timeout.
type waker struct{ fd int }

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &waker{fd}, nil
}

var one = []byte{1, 0, 0, 0, 0, 0, 0, 0}

func (w *waker) wake() { _, _ = unix.Write(w.fd, one) }

// sleep waits until woken or for d (d < 0: no limit), then clears the wake-up.
func (w *waker) sleep(d time.Duration) {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if d >= 0 && d < math.MaxInt64 {
		t := unix.NsecToTimespec(int64(d))
		ts = &t
	}
	_, _ = unix.Ppoll(fds, ts, nil)
	var buf [8]byte
	_, _ = unix.Read(w.fd, buf[:])
}
