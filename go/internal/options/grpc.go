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

func (v Values) duration(key string) time.Duration {
	d, _ := v[key].(time.Duration)
	return d
}

// ServerOptions are the grpc-go server options of the parsed values; maxMessageBytes
// (the server's --max-message-bytes) applies unless max-recv/send-msg-size are given.
func (v Values) ServerOptions(maxMessageBytes int) ([]grpc.ServerOption, error) {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes)}
	windows := []struct {
		key   string
		apply func(int32) grpc.ServerOption
	}{
		{"initial-window", grpc.InitialWindowSize}, {"initial-conn-window", grpc.InitialConnWindowSize},
		{"static-stream-window", grpc.StaticStreamWindowSize}, {"static-conn-window", grpc.StaticConnWindowSize},
	}
	for _, w := range windows {
		n, ok, err := v.size32(w.key)
		if err != nil {
			return nil, err
		}
		if ok {
			opts = append(opts, w.apply(n))
		}
	}
	if n, ok := v["read-buffer"].(int64); ok {
		opts = append(opts, grpc.ReadBufferSize(int(n)))
	}
	if n, ok := v["write-buffer"].(int64); ok {
		opts = append(opts, grpc.WriteBufferSize(int(n)))
	}
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
	var opts []grpc.DialOption
	windows := []struct {
		key   string
		apply func(int32) grpc.DialOption
	}{
		{"initial-window", grpc.WithInitialWindowSize}, {"initial-conn-window", grpc.WithInitialConnWindowSize},
		{"static-stream-window", grpc.WithStaticStreamWindowSize}, {"static-conn-window", grpc.WithStaticConnWindowSize},
	}
	for _, w := range windows {
		n, ok, err := v.size32(w.key)
		if err != nil {
			return nil, err
		}
		if ok {
			opts = append(opts, w.apply(n))
		}
	}
	if n, ok := v["read-buffer"].(int64); ok {
		opts = append(opts, grpc.WithReadBufferSize(int(n)))
	}
	if n, ok := v["write-buffer"].(int64); ok {
		opts = append(opts, grpc.WithWriteBufferSize(int(n)))
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
