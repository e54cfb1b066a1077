package options

import "google.golang.org/grpc/encoding"

// SetVTProtoCodec makes c the codec of codec=vtproto until the test ends (restore), so a test can see that the
// servers and connections it starts take the codec: a wrapper counting the calls that reach it.
func SetVTProtoCodec(c encoding.CodecV2) (restore func()) {
	previous := vtproto
	vtproto = c
	return func() { vtproto = previous }
}

// VTProtoCodec is the codec of codec=vtproto.
func VTProtoCodec() encoding.CodecV2 { return vtproto }
