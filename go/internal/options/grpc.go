package options

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
)

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
		if ok {
			opts = append(opts, windows[i](n))
		}
	}
	if n, ok := v["read-buffer"].(int64); ok {
		opts = append(opts, readBuffer(int(n)))
	}
	if n, ok := v["write-buffer"].(int64); ok {
		opts = append(opts, writeBuffer(int(n)))
	}
	return opts, nil
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
	if n, ok := v["max-recv-msg-size"].(int64); ok {
		opts = append(opts, grpc.MaxRecvMsgSize(int(n)))
	}
	if n, ok := v["max-send-msg-size"].(int64); ok {
		opts = append(opts, grpc.MaxSendMsgSize(int(n)))
	}
	if n, ok := v["max-concurrent-streams"].(int64); ok {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(min(n, math.MaxUint32))))
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
	// compression=gzip on the server: gzip is registered (by importing it), so the server answers
	// a gzip request with gzip; grpc-go has no server option that compresses unasked.
	_ = gzip.Name
	return opts, nil
}

// DialOptions are the grpc-go dial options of the parsed values (the pool is the caller's: Pool()).
func (v Values) DialOptions() ([]grpc.DialOption, error) {
	opts, err := sizeOptions(v, [4]func(int32) grpc.DialOption{grpc.WithInitialWindowSize, grpc.WithInitialConnWindowSize,
		grpc.WithStaticStreamWindowSize, grpc.WithStaticConnWindowSize}, grpc.WithReadBufferSize, grpc.WithWriteBufferSize)
	if err != nil {
		return nil, err
	}
	var calls []grpc.CallOption
	if n, ok := v["max-recv-msg-size"].(int64); ok {
		calls = append(calls, grpc.MaxCallRecvMsgSize(int(n)))
	}
	if n, ok := v["max-send-msg-size"].(int64); ok {
		calls = append(calls, grpc.MaxCallSendMsgSize(int(n)))
	}
	if v["compression"] == "gzip" {
		calls = append(calls, grpc.UseCompressor(gzip.Name))
	}
	if len(calls) > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(calls...))
	}
	permit, _ := v["keepalive-permit-without-stream"].(bool)
	params := keepalive.ClientParameters{Time: v.duration("keepalive-time"), Timeout: v.duration("keepalive-timeout"),
		PermitWithoutStream: permit}
	if params != (keepalive.ClientParameters{}) {
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
