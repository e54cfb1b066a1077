// Package codec is `--grpc-option codec=vtproto`: grpc-go's protobuf codec with vtprotobuf's generated
// marshalling (echopb's MarshalVT, UnmarshalVT and SizeVT, from echo_vtproto.pb.go) in place of
// google.golang.org/protobuf's reflection-driven one.
//
// Its name is "proto", the standard codec's, so the wire does not change (content-type
// application/grpc+proto) and a vtproto end talks to any standard one. It is not registered with
// encoding.RegisterCodecV2, which would replace grpc-go's codec for every server and connection of the
// process; a server or connection takes it by grpc.ForceServerCodecV2 or grpc.ForceCodecV2
// (go/internal/options does that for codec=vtproto).
package codec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Name is the codec's name: the standard one's, so the content-type on the wire is the same.
const Name = protocodec.Name

// vtMessage is a message with vtprotobuf's generated methods (marshal, unmarshal and size features).
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT(data []byte) (int, error)
	UnmarshalVT(data []byte) error
}

// VTProto marshals a message with vtprotobuf's methods when it has them, and any other message (the health
// and reflection services' own) with grpc-go's standard codec, byte for byte as that codec would.
type VTProto struct{}

var _ encoding.CodecV2 = VTProto{}

// standard is grpc-go's protobuf codec, registered by its encoding/proto package (imported above).
var standard = encoding.GetCodecV2(protocodec.Name)

// Name is "proto", the standard codec's name.
func (VTProto) Name() string { return Name }

// Marshal writes v into one buffer of exactly its size: from grpc-go's buffer pool when the size is at or
// above the pool's threshold, as the standard codec does, so the two differ only in how the bytes are made.
func (VTProto) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMessage)
	if !ok {
		return standard.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		data := make([]byte, size)
		if err := marshalInto(m, data); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(data)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if err := marshalInto(m, (*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// marshalInto fills data, which is m's SizeVT long (MarshalToSizedBufferVT writes from the end backwards).
func marshalInto(m vtMessage, data []byte) error {
	n, err := m.MarshalToSizedBufferVT(data)
	if err != nil {
		return fmt.Errorf("vtproto: failed to marshal %T: %v", m, err)
	}
	if n != len(data) {
		return fmt.Errorf("vtproto: %T marshalled to %d bytes, not its SizeVT of %d", m, n, len(data))
	}
	return nil
}

// Unmarshal resets v and reads data into it. UnmarshalVT merges into what v holds, where proto.Unmarshal
// (the standard codec) starts from an empty message: the reset keeps a reused message from carrying a
// field the new one lacks. UnmarshalVT copies bytes fields, so the buffer is freed at once.
func (VTProto) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(vtMessage)
	if !ok {
		return standard.Unmarshal(data, v)
	}
	if r, ok := v.(interface{ Reset() }); ok {
		r.Reset()
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := m.UnmarshalVT(buf.ReadOnlyData()); err != nil {
		return fmt.Errorf("vtproto: failed to unmarshal %T: %v", m, err)
	}
	return nil
}
