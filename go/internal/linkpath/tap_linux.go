package linkpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A host's packet reaches the emulator when the host's stack hands it to the TUN device, but
// the emulator only learns of it when its reader thread wakes up and reads it: on a virtual
// machine whose idle CPUs halt, tens of microseconds later, twice per round trip (ping at 1 ms
// one way measured 2.12 ms). netem starts the delay when the sender's packet reaches the qdisc;
// to do the same, a tap (an AF_PACKET socket on the TUN device, as tcpdump opens) receives the
// kernel's copy of every small outgoing packet with the time the device was handed it
// (SO_TIMESTAMPNS), and the reader starts a packet's delay then. Only small packets
// (tapMaxLen): a bulk flow's super-packets arrive back to back, read without a wake-up in
// between, and their copies would cost the sender's stack more than they correct.
const (
	tapMaxLen  = 512 // bytes of IP packet
	tapIDLen   = 48  // bytes compared to pair a copy with the packet read from the TUN device
	tapRingLen = 64  // copies kept while looking for the packet that was read
	tapMaxAge  = int64(1e9)
)

type tapCopy struct {
	id     [tapIDLen]byte
	n      int
	wallNs int64
}

// tap is one host's; only that host's reader thread uses it.
type tap struct {
	fd    int
	buf   [tapIDLen]byte
	oob   [64]byte
	iov   unix.Iovec
	msg   unix.Msghdr
	ring  [tapRingLen]tapCopy
	head  int
	count int
}

// The classic BPF ancillary load of the packet's type (linux/filter.h: SKF_AD_OFF + SKF_AD_PKTTYPE),
// which x/sys/unix does not name.
const skfAdPkttype = 0xfffff000 + 4

// tapFilter passes outgoing packets of at most tapMaxLen bytes, cut to tapIDLen bytes.
var tapFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: skfAdPkttype},
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.PACKET_OUTGOING},
	{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_LEN},
	{Code: unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, Jt: 1, Jf: 0, K: tapMaxLen},
	{Code: unix.BPF_RET | unix.BPF_K, K: tapIDLen},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},
}

// openTap opens the tap on device ifname in the namespace at netnsPath.
func openTap(netnsPath, ifname string) (*tap, error) {
	type result struct {
		t   *tap
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // in the host's namespace until the goroutine ends, as openTUN
		if err := enterNetns(netnsPath); err != nil {
			done <- result{nil, err}
			return
		}
		t, err := openTapHere(ifname)
		done <- result{t, err}
	}()
	r := <-done
	return r.t, r.err
}

func enterNetns(netnsPath string) error {
	target, err := unix.Open(netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", netnsPath, err)
	}
	defer unix.Close(target)
	return unix.Setns(target, unix.CLONE_NEWNET)
}

func openTapHere(ifname string) (*tap, error) {
	// Protocol 0 receives nothing until bind, so no packet passes before the filter is in place.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tap on %s: %w", ifname, err)
	}
	fail := func(what string, err error) (*tap, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("tap on %s: %s: %w", ifname, what, err)
	}
	prog := unix.SockFprog{Len: uint16(len(tapFilter)), Filter: &tapFilter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return fail("filter", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return fail("name", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return fail("SIOCGIFINDEX", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: int(ifr.Uint32())}); err != nil {
		return fail("bind", err)
	}
	t := &tap{fd: fd}
	t.iov.Base = &t.buf[0]
	t.iov.SetLen(len(t.buf))
	t.msg.Iov = &t.iov
	t.msg.Iovlen = 1
	return t, nil
}

func htons(v uint16) uint16 { return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v)) }

// recv reads one copy into the ring; false when there is none (or the ring is full).
func (t *tap) recv() bool {
	if t.count == tapRingLen {
		return false
	}
	var n uintptr
	for tries := 0; ; tries++ {
		t.msg.Control = &t.oob[0]
		t.msg.SetControllen(len(t.oob))
		var errno unix.Errno
		n, _, errno = unix.RawSyscall(unix.SYS_RECVMSG, uintptr(t.fd), uintptr(unsafe.Pointer(&t.msg)), unix.MSG_DONTWAIT)
		if errno == 0 {
			break
		}
		// The device was down when the tap was bound (labkit brings it up after the emulator
		// made it): the socket reports that once, ahead of its copies.
		if (errno != unix.ENETDOWN && errno != unix.EINTR) || tries > 0 {
			return false
		}
	}
	wall, ok := cmsgTimestampNs(t.oob[:t.msg.Controllen])
	if !ok {
		return true // a copy without its time is no use; the next may have one
	}
	c := &t.ring[(t.head+t.count)%tapRingLen]
	c.n = copy(c.id[:], t.buf[:min(int(n), tapIDLen)])
	c.wallNs = wall
	t.count++
	return true
}

// cmsgTimestampNs is the SCM_TIMESTAMPNS in a control buffer.
func cmsgTimestampNs(oob []byte) (int64, bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS &&
			int(h.Len) >= unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) {
			ts := (*unix.Timespec)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
			return ts.Nano(), true
		}
		oob = oob[unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0)):]
	}
	return 0, false
}

// sentAt is when the host handed ip (a packet just read from its TUN device) to the device, on
// the wall clock, if the tap has its copy. Copies ahead of it are of packets read before (or
// that the device dropped): they are discarded.
func (t *tap) sentAt(ip []byte) (int64, bool) {
	if len(ip) > tapMaxLen {
		return 0, false
	}
	want := ip[:min(len(ip), tapIDLen)]
	for i := 0; ; i++ {
		if i == t.count {
			if t.count == tapRingLen { // none of them: the oldest half is stale
				t.drop(tapRingLen / 2)
				i -= tapRingLen / 2
			}
			if !t.recv() {
				return 0, false
			}
			if i == t.count { // a copy without its time
				i--
				continue
			}
		}
		if c := &t.ring[(t.head+i)%tapRingLen]; bytes.Equal(c.id[:c.n], want) {
			wall := c.wallNs
			t.drop(i + 1)
			return wall, true
		}
	}
}

func (t *tap) drop(n int) {
	t.head = (t.head + n) % tapRingLen
	t.count -= n
}
