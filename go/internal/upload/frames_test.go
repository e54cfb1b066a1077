package upload

import (
	"bytes"
	"net"
	"testing"

	"golang.org/x/net/http2"
)

// The counter reads frames as x/net/http2's Framer writes them (preface, SETTINGS, HEADERS, DATA of several
// sizes, an empty DATA that ends the stream, a WINDOW_UPDATE), however the bytes are cut into writes.
func TestFramesAreCountedAcrossAnyCutOfTheBytes(t *testing.T) {
	var wire bytes.Buffer
	wire.WriteString(clientPreface)
	framer := http2.NewFramer(&wire, nil)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	must(framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83, 0x86}, EndHeaders: true}))
	for _, size := range []int{5 + 16, 1, 16384, 300} {
		must(framer.WriteData(1, false, bytes.Repeat([]byte{0}, size)))
	}
	must(framer.WriteData(1, true, nil))
	must(framer.WriteWindowUpdate(0, 65535))
	stream := wire.Bytes()
	for _, cut := range []int{1, 2, 7, 9, 10, 4096, len(stream)} {
		counter := NewFrameCounter()
		conn := counter.Wrap(discard{})
		writes := 0
		for rest := stream; len(rest) > 0; writes++ {
			n := min(cut, len(rest))
			conn.Write(rest[:n])
			rest = rest[n:]
		}
		if got, want := counter.Counts(), (FrameCounts{Frames: 8, DataFrames: 5, Writes: int64(writes)}); got != want {
			t.Fatalf("cut in %d-byte writes: %+v, want %+v", cut, got, want)
		}
	}
}

// A reconnect between uploads: the old connection's last write (a GOAWAY, cut mid-frame as a write can be) comes
// after the new connection's preface and first frames. Each connection is read on its own, so neither's bytes
// are taken for the other's frames.
func TestAnOldConnectionsLastWritesDoNotMixWithTheNewOnes(t *testing.T) {
	var old, fresh bytes.Buffer
	old.WriteString(clientPreface)
	oldFramer, freshFramer := http2.NewFramer(&old, nil), http2.NewFramer(&fresh, nil)
	fresh.WriteString(clientPreface)
	if err := oldFramer.WriteData(1, false, bytes.Repeat([]byte{1}, 100)); err != nil {
		t.Fatal(err)
	}
	oldHead := old.Len()
	if err := oldFramer.WriteGoAway(1, http2.ErrCodeNo, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := freshFramer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := freshFramer.WriteData(1, true, bytes.Repeat([]byte{2}, 50)); err != nil {
		t.Fatal(err)
	}
	counter := NewFrameCounter()
	first := counter.Wrap(discard{})
	first.Write(old.Bytes()[:oldHead+4]) // the DATA frame and the GOAWAY's first 4 header bytes
	second := counter.Wrap(discard{})
	second.Write(fresh.Bytes()[:len(clientPreface)+5])
	first.Write(old.Bytes()[oldHead+4:]) // the rest of the GOAWAY, after the new connection began
	second.Write(fresh.Bytes()[len(clientPreface)+5:])
	if got, want := counter.Counts(), (FrameCounts{Frames: 4, DataFrames: 2, Writes: 4}); got != want {
		t.Fatalf("%+v, want %+v (old: DATA, GOAWAY; new: SETTINGS, DATA)", got, want)
	}
}

// discard is a connection that takes every write.
type discard struct{ net.Conn }

func (discard) Write(p []byte) (int, error) { return len(p), nil }
