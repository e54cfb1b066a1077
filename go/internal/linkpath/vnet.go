package linkpath

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// VnetHdrLen is the size of struct virtio_net_hdr, which prefixes every packet read from or
// written to a TUN device opened with IFF_VNET_HDR.
const VnetHdrLen = 10

// vnetHdr is struct virtio_net_hdr (include/uapi/linux/virtio_net.h), in host byte order as
// the TUN device uses it unless told otherwise (TUNSETVNETLE).
type vnetHdr struct {
	flags, gsoType                         uint8
	hdrLen, gsoSize, csumStart, csumOffset uint16
}

func decodeVnet(b []byte) vnetHdr {
	e := binary.NativeEndian
	return vnetHdr{b[0], b[1], e.Uint16(b[2:]), e.Uint16(b[4:]), e.Uint16(b[6:]), e.Uint16(b[8:])}
}

func (h vnetHdr) encode(b []byte) {
	e := binary.NativeEndian
	b[0], b[1] = h.flags, h.gsoType
	e.PutUint16(b[2:], h.hdrLen)
	e.PutUint16(b[4:], h.gsoSize)
	e.PutUint16(b[6:], h.csumStart)
	e.PutUint16(b[8:], h.csumOffset)
}

const (
	tcpFIN = 0x01
	tcpPSH = 0x08
	tcpCWR = 0x80
)

var errBadPacket = errors.New("malformed segmentation-offload packet")

// tcp4Layout is where the headers of a TCP/IPv4 super-packet end.
type tcp4Layout struct {
	ipLen, hdrLen int // IP header length; IP + TCP header length
	gsoSize       int
}

// tcp4Super returns the layout of a TSO super-packet (virtio header h, IP packet ip), or ok
// false when ip is a single packet. Lengths come from the headers themselves: the kernel's
// hdr_len may cover more than the headers.
func tcp4Super(h vnetHdr, ip []byte) (tcp4Layout, bool, error) {
	if h.gsoType != unix.VIRTIO_NET_HDR_GSO_TCPV4 || h.gsoSize == 0 {
		return tcp4Layout{}, false, nil
	}
	if len(ip) < 20 || ip[0]>>4 != 4 {
		return tcp4Layout{}, false, errBadPacket
	}
	ipLen := int(ip[0]&0x0f) * 4
	if ipLen < 20 || len(ip) < ipLen+20 || ip[9] != unix.IPPROTO_TCP {
		return tcp4Layout{}, false, errBadPacket
	}
	tcpLen := int(ip[ipLen+12]>>4) * 4
	if tcpLen < 20 || len(ip) < ipLen+tcpLen {
		return tcp4Layout{}, false, errBadPacket
	}
	return tcp4Layout{ipLen: ipLen, hdrLen: ipLen + tcpLen, gsoSize: int(h.gsoSize)}, true, nil
}

// wireSize is what the packet (vnet header h, IP packet ip) is on the wire: how many IP
// packets once segmented, and their bytes, each segment's headers included.
func wireSize(h vnetHdr, ip []byte) (segs, bytes int) {
	l, super, err := tcp4Super(h, ip)
	if !super || err != nil {
		return 1, len(ip)
	}
	payload := len(ip) - l.hdrLen
	segs = max(1, (payload+l.gsoSize-1)/l.gsoSize)
	return segs, len(ip) + (segs-1)*l.hdrLen
}

// splitTCP4 cuts a TSO super-packet into chunks of at most perChunk segments, as the kernel's
// tcp_gso_segment would cut it into single ones: each chunk gets its IP length, ID and
// header checksum, its sequence number, FIN and PSH only on the last, CWR only on the first,
// and the pseudo-header sum in its TCP checksum with NEEDS_CSUM, so the receiving kernel
// treats it like any locally sent packet (CHECKSUM_PARTIAL). A chunk of several segments
// stays a super-packet. alloc returns a buffer of n bytes; each chunk is written into one,
// virtio header first.
func splitTCP4(l tcp4Layout, ip []byte, perChunk int, alloc func(n int) []byte, emit func([]byte)) {
	payload := ip[l.hdrLen:]
	seq0 := binary.BigEndian.Uint32(ip[l.ipLen+4:])
	id0 := binary.BigEndian.Uint16(ip[4:])
	flags := ip[l.ipLen+13]
	step := perChunk * l.gsoSize
	for off := 0; off < len(payload); off += step {
		end := min(off+step, len(payload))
		n := l.hdrLen + end - off
		b := alloc(VnetHdrLen + n)[:VnetHdrLen+n]
		out := b[VnetHdrLen:]
		copy(out, ip[:l.hdrLen])
		copy(out[l.hdrLen:], payload[off:end])
		binary.BigEndian.PutUint16(out[2:], uint16(n))
		binary.BigEndian.PutUint16(out[4:], id0+uint16(off/l.gsoSize))
		out[10], out[11] = 0, 0
		binary.BigEndian.PutUint16(out[10:], ^checksum(out[:l.ipLen], 0))
		binary.BigEndian.PutUint32(out[l.ipLen+4:], seq0+uint32(off))
		f := flags
		if end < len(payload) {
			f &^= tcpFIN | tcpPSH
		}
		if off > 0 {
			f &^= tcpCWR
		}
		out[l.ipLen+13] = f
		psum := pseudoHeaderSum(out[12:16], out[16:20], unix.IPPROTO_TCP, n-l.ipLen)
		binary.BigEndian.PutUint16(out[l.ipLen+16:], checksum(nil, psum))
		h := vnetHdr{flags: unix.VIRTIO_NET_HDR_F_NEEDS_CSUM, csumStart: uint16(l.ipLen), csumOffset: 16}
		if end-off > l.gsoSize {
			h.gsoType, h.gsoSize, h.hdrLen = unix.VIRTIO_NET_HDR_GSO_TCPV4, uint16(l.gsoSize), uint16(l.hdrLen)
		}
		h.encode(b)
		emit(b)
	}
}

// sum16 adds b as big-endian 16-bit words to initial, without folding.
func sum16(b []byte, initial uint64) uint64 {
	s := initial
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// checksum folds the one's-complement sum of b and initial to 16 bits (not inverted).
func checksum(b []byte, initial uint64) uint16 {
	s := sum16(b, initial)
	for s > 0xffff {
		s = (s >> 16) + (s & 0xffff)
	}
	return uint16(s)
}

func pseudoHeaderSum(src, dst []byte, proto uint8, length int) uint64 {
	return sum16(dst, sum16(src, uint64(proto)+uint64(length)))
}
