package linkpath

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A datagram socket pair stands in for the AF_PACKET tap: the kernel stamps each datagram
// with SO_TIMESTAMPNS as it does the tap's copies, and the pairing logic is the same.
func newTestTap(t *testing.T) (*tap, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		t.Fatal(err)
	}
	tp := &tap{fd: fds[0]}
	tp.iov.Base = &tp.buf[0]
	tp.iov.SetLen(len(tp.buf))
	tp.msg.Iov = &tp.iov
	tp.msg.Iovlen = 1
	return tp, fds[1]
}

// packet is a small IPv4-looking packet whose first bytes tell it apart (as IP ID and TCP
// sequence numbers do), longer than what the tap keeps of it.
func packet(id byte, length int) []byte {
	p := make([]byte, length)
	p[0], p[4], p[5] = 0x45, id, id^0x5a
	for i := 20; i < length; i++ {
		p[i] = byte(i) ^ id
	}
	return p
}

// send is what the kernel gives the tap: the packet cut to tapIDLen bytes.
func send(t *testing.T, fd int, p []byte) {
	t.Helper()
	if _, err := unix.Write(fd, p[:min(len(p), tapIDLen)]); err != nil {
		t.Fatal(err)
	}
}

func TestTapPairsEachPacketWithTheTimeItsCopyWasSent(t *testing.T) {
	tp, peer := newTestTap(t)
	before := time.Now().UnixNano()
	send(t, peer, packet(1, 100))
	time.Sleep(2 * time.Millisecond)
	send(t, peer, packet(2, 100))
	after := time.Now().UnixNano()

	first, ok := tp.sentAt(packet(1, 100))
	if !ok || first < before || first > after {
		t.Fatalf("packet 1: %d, %v; want a time in [%d, %d]", first, ok, before, after)
	}
	second, ok := tp.sentAt(packet(2, 100))
	if !ok || second-first < int64(2*time.Millisecond) || second > after {
		t.Fatalf("packet 2: %d, %v; want 2 ms or more after %d", second, ok, first)
	}
	if _, ok := tp.sentAt(packet(3, 100)); ok {
		t.Fatal("a packet whose copy never came was paired")
	}
}

func TestTapSkipsCopiesOfPacketsNotReadAndKeepsThoseOfLaterOnes(t *testing.T) {
	tp, peer := newTestTap(t)
	// Copies of 1 and 2, whose packets the device dropped, are ahead of 3's: they are discarded.
	for id := byte(1); id <= 4; id++ {
		send(t, peer, packet(id, 60))
	}
	if _, ok := tp.sentAt(packet(3, 60)); !ok {
		t.Fatal("packet 3 not paired behind two stale copies")
	}
	// 5's copy was dropped (the tap's buffer was full): 5 goes unstamped, and 4's and 6's
	// copies are still there for their packets.
	send(t, peer, packet(6, 60))
	if _, ok := tp.sentAt(packet(5, 60)); ok {
		t.Fatal("packet 5 paired with another packet's copy")
	}
	for _, id := range []byte{4, 6} {
		if _, ok := tp.sentAt(packet(id, 60)); !ok {
			t.Fatalf("packet %d lost its copy to packet 5's search", id)
		}
	}
}

func TestTapLeavesBigPacketsAndSurvivesAFullRingOfStaleCopies(t *testing.T) {
	tp, peer := newTestTap(t)
	if _, ok := tp.sentAt(packet(1, tapMaxLen+1)); ok {
		t.Fatal("a packet the filter passes no copy of was paired")
	}
	for i := 0; i < tapRingLen+10; i++ {
		send(t, peer, packet(byte(100+i), 60))
	}
	send(t, peer, packet(7, 60))
	if _, ok := tp.sentAt(packet(7, 60)); !ok {
		t.Fatal("packet 7 not paired behind more stale copies than the ring holds")
	}
}
