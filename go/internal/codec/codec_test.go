package codec_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"labkit/go/echopb"
	"labkit/go/internal/codec"
)

// messages are echo.proto's messages at each payload size of the tests (empty, one byte, small, pooled).
func messages() []proto.Message {
	var out []proto.Message
	for _, size := range []int{0, 1, 64, 128 << 10} {
		payload := bytes.Repeat([]byte{0xa5}, size)
		out = append(out, &echopb.EchoRequest{Payload: payload}, &echopb.Chunk{Content: payload},
			&echopb.EchoResponse{PayloadLength: int64(size)},
			&echopb.UploadStatus{Message: strings.Repeat("é", size/2), Code: echopb.UploadStatusCode_FAILED,
				BytesReceived: int64(size)})
	}
	return out
}

// The vtproto codec's bytes are proto.Marshal's, and they read back as the same message.
func TestMarshalIsProtoMarshal(t *testing.T) {
	c := codec.VTProto{}
	for _, message := range messages() {
		name := fmt.Sprintf("%T of %d bytes", message, proto.Size(message))
		want, err := proto.Marshal(message)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Marshal(message)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%s: marshalled to %d bytes unlike proto.Marshal's %d", name, len(got), len(want))
		}
		back := message.ProtoReflect().New().Interface()
		if err := c.Unmarshal(data, back); err != nil || !proto.Equal(back, message) {
			t.Errorf("%s: read back as %d bytes (%v)", name, proto.Size(back), err)
		}
		data.Free()
	}
}

// vtCounted is an echo request whose generated methods count their calls.
type vtCounted struct {
	*echopb.EchoRequest
	sized, marshalled, unmarshalled int
}

func (m *vtCounted) SizeVT() int { m.sized++; return m.EchoRequest.SizeVT() }
func (m *vtCounted) MarshalToSizedBufferVT(data []byte) (int, error) {
	m.marshalled++
	return m.EchoRequest.MarshalToSizedBufferVT(data)
}
func (m *vtCounted) UnmarshalVT(data []byte) error {
	m.unmarshalled++
	return m.EchoRequest.UnmarshalVT(data)
}

// A message with vtprotobuf's methods is marshalled by them, not by the protobuf runtime.
func TestTheGeneratedMethodsAreUsed(t *testing.T) {
	c := codec.VTProto{}
	m := &vtCounted{EchoRequest: &echopb.EchoRequest{Payload: []byte("abc")}}
	data, err := c.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(data, m); err != nil {
		t.Fatal(err)
	}
	if m.sized != 1 || m.marshalled != 1 || m.unmarshalled != 1 || string(m.GetPayload()) != "abc" {
		t.Errorf("SizeVT %d, MarshalToSizedBufferVT %d, UnmarshalVT %d calls; payload %q",
			m.sized, m.marshalled, m.unmarshalled, m.GetPayload())
	}
}

// A message without them (health's, reflection's) goes through grpc-go's standard codec.
func TestOtherMessagesFallBackToProtobuf(t *testing.T) {
	c := codec.VTProto{}
	message := &healthpb.HealthCheckRequest{Service: "labkit.echo.EchoService"}
	data, err := c.Marshal(message)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(message)
	if !bytes.Equal(data.Materialize(), want) {
		t.Errorf("marshalled to %x, proto.Marshal to %x", data.Materialize(), want)
	}
	back := &healthpb.HealthCheckRequest{}
	if err := c.Unmarshal(data, back); err != nil || back.GetService() != message.GetService() {
		t.Errorf("read back %v (%v)", back, err)
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Error("a string was marshalled")
	}
}

// Reading into a message that holds values leaves only what the bytes say, as proto.Unmarshal does (UnmarshalVT
// alone would merge: a field absent from the bytes would keep its old value).
func TestUnmarshalStartsFromAnEmptyMessage(t *testing.T) {
	c := codec.VTProto{}
	reused := &echopb.UploadStatus{Message: "old", BytesReceived: 7, Sha256: "old"}
	data, err := c.Marshal(&echopb.UploadStatus{Code: echopb.UploadStatusCode_OK})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(data, reused); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(reused, &echopb.UploadStatus{Code: echopb.UploadStatusCode_OK}) {
		t.Errorf("read into a used message: %v", reused)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05, 'a'})}, &echopb.EchoRequest{}); err == nil {
		t.Error("a truncated message was read")
	}
}

// The codec is named as the standard one, so the content-type is application/grpc+proto, and it is not
// registered: grpc-go's own "proto" codec stays every other server's and connection's.
func TestNamedProtoAndNotRegistered(t *testing.T) {
	if name := (codec.VTProto{}).Name(); name != "proto" {
		t.Errorf("Name() = %q", name)
	}
	if _, replaced := encoding.GetCodecV2("proto").(codec.VTProto); replaced {
		t.Error("the vtproto codec is registered as grpc-go's proto codec")
	}
}
