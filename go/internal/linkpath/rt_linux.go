package linkpath

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// realtimePriority is the SCHED_FIFO priority of the data-path threads: above every normal
// process, as the softirq the kernel's netem runs in is, and low among real-time ones.
const realtimePriority = 10

// becomeRealtime gives the calling (locked) thread exact timer wake-ups (1 ns of timer slack
// instead of 50 µs) and SCHED_FIFO, or where that is refused the largest share a normal
// thread can have (nice -20); it reports whether SCHED_FIFO was granted.
//
// Measured on this project's 2-CPU machines, busy with other work: a sleeping thread woke
// p99 ~50 µs late under SCHED_FIFO and ~800 µs late at nice -20. Real-time threads must not
// then wait on the Go runtime's normal threads: see the raw system calls below.
func becomeRealtime() bool {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: realtimePriority}
	if unix.SchedSetAttr(0, &attr, 0) == nil {
		return true
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -20)
	return false
}

// The data-path threads make their system calls raw: without the runtime's entersyscall and
// exitsyscall, a thread keeps its P through a blocking call, so coming back never waits for
// a P or for the scheduler's lock, which a normal thread of the runtime may hold while the
// real-time threads keep it off the CPU (with Go's own syscalls, SCHED_FIFO threads carrying
// 1 Gbit/s came back from ppoll 20-900 ms late; raw, p99 under 100 µs).
// The price is that a stop-the-world waits for every raw call to return: the calls that can
// block return within maxBlock, and the collector is off (cmd/labkit-go/link.go).

const maxBlock = 100 * time.Millisecond

func rawRead(fd int, b []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), errno
}

func rawWrite(fd int, b []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), errno
}

// rawPoll waits until fd is readable or for d (at most maxBlock).
func rawPoll(fd int, d time.Duration) {
	d = min(max(d, 0), maxBlock)
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
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

func (w *waker) wake() { _, _ = rawWrite(w.fd, one) }

// sleep waits until woken or for d (at most maxBlock), then clears the wake-up.
func (w *waker) sleep(d time.Duration) {
	rawPoll(w.fd, d)
	var buf [8]byte
	_, _ = rawRead(w.fd, buf[:])
}
