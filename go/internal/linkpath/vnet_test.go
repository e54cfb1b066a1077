package linkpath

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// superPacket builds a TCP/IPv4 TSO super-packet as the kernel hands it to a TUN reader:
// one IP and TCP header (with options), the payload of several segments, the pseudo-header
// sum in the TCP checksum, and its virtio header.
func superPacket(payload []byte, gsoSize int, flags byte) (vnetHdr, []byte) {
	ip := make([]byte, 20+32+len(payload))
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], 1000)
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 0xfffff000) // wraps inside the packet
	tcp[12], tcp[13] = 8<<4, flags
	copy(ip[52:], payload)
	binary.BigEndian.PutUint16(tcp[16:], checksum(nil, pseudoHeaderSum(ip[12:16], ip[16:20], unix.IPPROTO_TCP, len(ip)-20)))
	return vnetHdr{flags: unix.VIRTIO_NET_HDR_F_NEEDS_CSUM, gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4, hdrLen: 52,
		gsoSize: uint16(gsoSize), csumStart: 20, csumOffset: 16}, ip
}

// completeChecksum does what the receiving kernel may do with CHECKSUM_PARTIAL: sum from
// csum_start, starting from the partial sum in place, and store the complement.
func completeChecksum(h vnetHdr, ip []byte) []byte {
	out := bytes.Clone(ip)
	at := int(h.csumStart + h.csumOffset)
	partial := binary.BigEndian.Uint16(out[at:])
	out[at], out[at+1] = 0, 0
	binary.BigEndian.PutUint16(out[at:], ^checksum(out[h.csumStart:], uint64(partial)))
	return out
}

func TestSplitTCP4IntoSegmentsMakesValidPackets(t *testing.T) {
	payload := make([]byte, 10000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	h, ip := superPacket(payload, 1448, tcpPSH|tcpCWR|0x10)
	segs, wire := wireSize(h, ip)
	if segs != 7 || wire != len(ip)+6*52 {
		t.Fatalf("wire size %d segs %d bytes", segs, wire)
	}
	l, super, err := tcp4Super(h, ip)
	if !super || err != nil {
		t.Fatal(super, err)
	}
	var chunks [][]byte
	splitTCP4(l, ip, 1, func(n int) []byte { return make([]byte, n) }, func(b []byte) { chunks = append(chunks, b) })
	if len(chunks) != 7 {
		t.Fatalf("%d chunks", len(chunks))
	}
	var joined []byte
	for i, b := range chunks {
		ch := decodeVnet(b)
		pkt := b[VnetHdrLen:]
		if ch.gsoType != unix.VIRTIO_NET_HDR_GSO_NONE || ch.flags != unix.VIRTIO_NET_HDR_F_NEEDS_CSUM {
			t.Errorf("chunk %d header %+v", i, ch)
		}
		if int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) || checksum(pkt[:20], 0) != 0xffff {
			t.Errorf("chunk %d: IP length or header checksum wrong", i)
		}
		if id := binary.BigEndian.Uint16(pkt[4:]); id != 1000+uint16(i) {
			t.Errorf("chunk %d IP ID %d", i, id)
		}
		if seq := binary.BigEndian.Uint32(pkt[24:]); seq != 0xfffff000+uint32(i*1448) {
			t.Errorf("chunk %d seq %x", i, seq)
		}
		flags := pkt[33]
		if (flags&tcpPSH != 0) != (i == 6) || (flags&tcpCWR != 0) != (i == 0) || flags&0x10 == 0 {
			t.Errorf("chunk %d flags %#x", i, flags)
		}
		// Completed as the kernel would, the TCP checksum verifies over the pseudo-header.
		full := completeChecksum(ch, pkt)
		if checksum(full[20:], pseudoHeaderSum(full[12:16], full[16:20], unix.IPPROTO_TCP, len(full)-20)) != 0xffff {
			t.Errorf("chunk %d: TCP checksum does not verify", i)
		}
		joined = append(joined, pkt[52:]...)
	}
	if !bytes.Equal(joined, payload) {
		t.Error("the chunks do not carry the payload in order")
	}
}

func TestSplitTCP4KeepsSuperPacketsOfSeveralSegments(t *testing.T) {
	h, ip := superPacket(make([]byte, 10000), 1000, tcpFIN|0x10)
	l, _, _ := tcp4Super(h, ip)
	var chunks [][]byte
	splitTCP4(l, ip, 4, func(n int) []byte { return make([]byte, n) }, func(b []byte) { chunks = append(chunks, b) })
	if len(chunks) != 3 {
		t.Fatalf("%d chunks of 4, 4 and 2 segments", len(chunks))
	}
	for i, b := range chunks {
		ch := decodeVnet(b)
		if ch.gsoType != unix.VIRTIO_NET_HDR_GSO_TCPV4 || ch.gsoSize != 1000 || ch.hdrLen != 52 {
			t.Errorf("chunk %d: %+v", i, ch)
		}
		if segs, _ := wireSize(ch, b[VnetHdrLen:]); segs != []int{4, 4, 2}[i] {
			t.Errorf("chunk %d stands for %d segments", i, segs)
		}
		if fin := b[VnetHdrLen+33]&tcpFIN != 0; fin != (i == 2) {
			t.Errorf("chunk %d FIN %v", i, fin)
		}
	}
}

func TestWireSizeOfPlainPackets(t *testing.T) {
	ping := make([]byte, 84)
	ping[0] = 0x45
	if segs, n := wireSize(vnetHdr{}, ping); segs != 1 || n != 84 {
		t.Errorf("%d %d", segs, n)
	}
	if _, _, err := tcp4Super(vnetHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4, gsoSize: 1000}, ping[:10]); err == nil {
		t.Error("a truncated super-packet is accepted")
	}
}
