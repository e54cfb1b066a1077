package options

import (
	"context"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"

	"labkit/go/internal/codec"
)

// vtproto is the codec of codec=vtproto; a variable so that the tests can count the calls that reach it.
var vtproto encoding.CodecV2 = codec.VTProto{}

func (v Values) size32(key string) (int32, bool, error) {
	raw, ok := v[key]
	if !ok {
		return 0, false, nil
	}
	n := raw.(int64)
	if n > math.MaxInt32 {
		return 0, false, fmt.Errorf("--grpc-option %s=%d is larger than grpc-go takes (%d)", key, n, math.MaxInt32)
	}
	return int32(n), true, nil
}

// minWindowBytes is HTTP/2's default window; grpc-go ignores a smaller one without a word, so it is refused.
const minWindowBytes = 65535

// grpc-go raises a shorter keepalive-time to these (with a warning nobody sees), so they are refused.
const (
	minClientKeepalive = 10 * time.Second
	minServerKeepalive = time.Second
)

// windowKeys are the flow-control window options, in the order sizeOptions takes their setters.
var windowKeys = [4]string{"initial-window", "initial-conn-window", "static-stream-window", "static-conn-window"}

// sizeOptions turns the window and buffer options into server or dial options (T), one setter each, so the
// server and the client read the same keys the same way.
func sizeOptions[T any](v Values, windows [4]func(int32) T, readBuffer, writeBuffer func(int) T) ([]T, error) {
	var opts []T
	for i, key := range windowKeys {
		n, ok, err := v.size32(key)
		if err != nil {
			return nil, err
		}
		if ok && n < minWindowBytes {
			return nil, fmt.Errorf("--grpc-option %s=%d is below %d bytes, which grpc-go ignores", key, n, minWindowBytes)
		}
		if ok {
			opts = append(opts, windows[i](n))
		}
	}
	buffers := []struct {
		key string
		set func(int) T
	}{{"read-buffer", readBuffer}, {"write-buffer", writeBuffer}}
	for _, buffer := range buffers {
		n, ok, err := v.size32(buffer.key)
		if err != nil {
			return nil, err
		}
		if ok {
			opts = append(opts, buffer.set(int(n)))
		}
	}
	return opts, nil
}

// messageSizes are max-recv-msg-size and max-send-msg-size when given (-1 when not), held to int32 as
// the windows: grpcio's arguments are C ints, so a larger value could mean nothing on the Python side.
func (v Values) messageSizes() (recv, send int, err error) {
	sizes := [2]int{-1, -1}
	for i, key := range []string{"max-recv-msg-size", "max-send-msg-size"} {
		n, ok, err := v.size32(key)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			sizes[i] = int(n)
		}
	}
	return sizes[0], sizes[1], nil
}

func (v Values) duration(key string) time.Duration {
	d, _ := v[key].(time.Duration)
	return d
}

// ServerOptions are the grpc-go server options of the parsed values; maxMessageBytes
// (the server's --max-message-bytes) applies unless max-recv/send-msg-size are given.
func (v Values) ServerOptions(maxMessageBytes int) ([]grpc.ServerOption, error) {
	opts, err := sizeOptions(v, [4]func(int32) grpc.ServerOption{grpc.InitialWindowSize, grpc.InitialConnWindowSize,
		grpc.StaticStreamWindowSize, grpc.StaticConnWindowSize}, grpc.ReadBufferSize, grpc.WriteBufferSize)
	if err != nil {
		return nil, err
	}
	opts = append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes)}, opts...)
	recv, send, err := v.messageSizes()
	if err != nil {
		return nil, err
	}
	if recv >= 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(recv))
	}
	if send >= 0 {
		opts = append(opts, grpc.MaxSendMsgSize(send))
	}
	if n, ok := v["max-concurrent-streams"].(int64); ok {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(min(n, math.MaxUint32))))
	}
	if err := v.checkKeepalive(minServerKeepalive, "server"); err != nil {
		return nil, err
	}
	params := keepalive.ServerParameters{Time: v.duration("keepalive-time"), Timeout: v.duration("keepalive-timeout"),
		MaxConnectionIdle: v.duration("max-connection-idle"), MaxConnectionAge: v.duration("max-connection-age")}
	if params != (keepalive.ServerParameters{}) {
		opts = append(opts, grpc.KeepaliveParams(params))
	}
	_, minTimeGiven := v["keepalive-min-time"]
	permit, permitGiven := v["keepalive-permit-without-stream"].(bool)
	if minTimeGiven || permitGiven {
		policy := keepalive.EnforcementPolicy{MinTime: v.duration("keepalive-min-time"), PermitWithoutStream: permit}
		if !minTimeGiven {
			policy.MinTime = 5 * time.Minute // grpc-go's default enforcement
		}
		opts = append(opts, grpc.KeepaliveEnforcementPolicy(policy))
	}
	if v["compression"] == "gzip" {
		opts = append(opts, grpc.ChainUnaryInterceptor(gzipUnary), grpc.ChainStreamInterceptor(gzipStream))
	}
	// codec=proto is grpc-go's registered codec, which needs no option.
	if v["codec"] == "vtproto" {
		opts = append(opts, grpc.ForceServerCodecV2(vtproto))
	}
	return opts, nil
}

// gzipUnary and gzipStream compress every response, as grpcio's server does with gzip as its default
// algorithm: grpc-go has no server option for it, only a per-call compressor (which a client that
// does not accept gzip refuses, and then the response goes uncompressed).
func gzipUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	_ = grpc.SetSendCompressor(ctx, gzip.Name)
	return handler(ctx, req)
}

func gzipStream(srv any, stream grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	_ = grpc.SetSendCompressor(stream.Context(), gzip.Name)
	return handler(srv, stream)
}

// checkKeepalive refuses a keepalive-time grpc-go would raise on this side.
func (v Values) checkKeepalive(floor time.Duration, side string) error {
	if d, ok := v["keepalive-time"].(time.Duration); ok && d < floor {
		return fmt.Errorf("--grpc-option keepalive-time=%v is below grpc-go's %s minimum of %v, which it would use instead",
			d, side, floor)
	}
	return nil
}

// DialOptions are the grpc-go dial options of the parsed values (the pool is the caller's: Pool()).
func (v Values) DialOptions() ([]grpc.DialOption, error) {
	opts, err := sizeOptions(v, [4]func(int32) grpc.DialOption{grpc.WithInitialWindowSize, grpc.WithInitialConnWindowSize,
		grpc.WithStaticStreamWindowSize, grpc.WithStaticConnWindowSize}, grpc.WithReadBufferSize, grpc.WithWriteBufferSize)
	if err != nil {
		return nil, err
	}
	recv, send, err := v.messageSizes()
	if err != nil {
		return nil, err
	}
	var calls []grpc.CallOption
	if recv >= 0 {
		calls = append(calls, grpc.MaxCallRecvMsgSize(recv))
	}
	if send >= 0 {
		calls = append(calls, grpc.MaxCallSendMsgSize(send))
	}
	if v["compression"] == "gzip" {
		calls = append(calls, grpc.UseCompressor(gzip.Name))
	}
	if v["codec"] == "vtproto" {
		// Named "proto", it sends content-type application/grpc+proto, which any gRPC server reads as protobuf.
		calls = append(calls, grpc.ForceCodecV2(vtproto))
	}
	if len(calls) > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(calls...))
	}
	if err := v.checkKeepalive(minClientKeepalive, "client"); err != nil {
		return nil, err
	}
	permit, _ := v["keepalive-permit-without-stream"].(bool)
	params := keepalive.ClientParameters{Time: v.duration("keepalive-time"), Timeout: v.duration("keepalive-timeout"),
		PermitWithoutStream: permit}
	if params != (keepalive.ClientParameters{}) {
		if params.Time == 0 {
			// grpc-go would read an unset time as 0 and raise it to 10 s, turning pings on; keepalive-timeout
			// or keepalive-permit-without-stream alone must leave them off, as in grpcio.
			params.Time = time.Duration(math.MaxInt64)
		}
		opts = append(opts, grpc.WithKeepaliveParams(params))
	}
	return opts, nil
}

// Pool is the number of connections the client spreads its calls over (1 unless pool=N).
func (v Values) Pool() int {
	if n, ok := v["pool"].(int64); ok {
		return int(n)
	}
	return 1
}
