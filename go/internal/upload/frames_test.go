package upload

import (
	"bytes"
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
		writes := 0
		for rest := stream; len(rest) > 0; writes++ {
			n := min(cut, len(rest))
			counter.Written(rest[:n])
			rest = rest[n:]
		}
		if got, want := counter.Counts(), (FrameCounts{Frames: 8, DataFrames: 5, Writes: int64(writes)}); got != want {
			t.Fatalf("cut in %d-byte writes: %+v, want %+v", cut, got, want)
		}
	}
}
