package echo

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // answer gzip-compressed calls (compression=gzip on the client)
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"labkit/go/echopb"
	"labkit/go/internal/address"
	"labkit/go/internal/files"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
	"labkit/go/internal/reason"
)

// The server's defaults, as the Python server's.
const (
	DefaultMaxMessageBytes = 4 << 20 // gRPC's own default receive limit
	DefaultMaxUploadBytes  = 1 << 30
)

// ServerConfig is what `labkit-go serve` is told: the flags of `labkit echo serve`.
type ServerConfig struct {
	Bind, TLSCert, TLSKey, Grace              string
	MaxMessageBytes, MaxUploadBytes           int64
	TCPEchoPort, HTTP2Port, PermitKeepaliveMs int
	Reflection                                bool
	GRPCOptions                               []string
	Given                                     map[string]bool // flags set on the command line: a side endpoint is served when its port is given, even 0
	Version                                   string          // labkit's, for the ready line
}

// Server is the gRPC echo server with its side endpoints (the raw TCP echo, HTTP/2), listening.
type Server struct {
	// Ready is the server's ready line: where it listens and what it is.
	Ready   map[string]any
	closers []func()
}

func (c *ServerConfig) check() (host string, grace time.Duration, err error) {
	if host, err = address.Bind(c.Bind); err != nil {
		return "", 0, err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return "", 0, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if c.MaxMessageBytes < 1 || c.MaxMessageBytes > limits.MaxMessageBytes {
		return "", 0, fmt.Errorf("max message size must be between 1 byte and %d, not %d", limits.MaxMessageBytes, c.MaxMessageBytes)
	}
	if err := c.checkSideFlags(); err != nil {
		return "", 0, err
	}
	if grace, err = limits.ParseDuration("grace", c.Grace); err != nil {
		return "", 0, err
	}
	return host, grace, nil
}

// checkSideFlags holds the flags of the side endpoints to the ranges the Python CLI's click types allow.
func (c *ServerConfig) checkSideFlags() error {
	for _, side := range []struct {
		name string
		port int
	}{{"tcp-echo-port", c.TCPEchoPort}, {"http2-port", c.HTTP2Port}} {
		if err := address.CheckPort(side.name, side.port, 0); err != nil {
			return err
		}
	}
	if c.Given["permit-keepalive-ms"] && (c.PermitKeepaliveMs < 1 || c.PermitKeepaliveMs > limits.MaxKeepaliveMs) {
		return fmt.Errorf("--permit-keepalive-ms must be between 1 and %d, not %d", limits.MaxKeepaliveMs, c.PermitKeepaliveMs)
	}
	if c.MaxUploadBytes < 0 || c.MaxUploadBytes > limits.MaxFileBytes {
		return fmt.Errorf("--max-upload-bytes must be between 0 and %d, not %d", limits.MaxFileBytes, c.MaxUploadBytes)
	}
	if c.Given["max-upload-bytes"] && !c.Given["http2-port"] {
		return fmt.Errorf("--max-upload-bytes bounds the HTTP/2 endpoint; give --http2-port too")
	}
	return nil
}

// StartServer checks c, then listens and serves until Stop.
func StartServer(c ServerConfig) (*Server, error) {
	host, grace, err := c.check()
	if err != nil {
		return nil, err
	}
	values, err := options.Parse(c.GRPCOptions, "server")
	if err != nil {
		return nil, err
	}
	serverOptions, err := values.ServerOptions(int(c.MaxMessageBytes))
	if err != nil {
		return nil, err
	}
	if c.PermitKeepaliveMs > 0 {
		// Client pings are accepted this often, also between calls, as the Python server's
		// --permit-keepalive-ms (grpc-go's default answers frequent pings with GOAWAY).
		serverOptions = append(serverOptions, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: time.Duration(c.PermitKeepaliveMs) * time.Millisecond, PermitWithoutStream: true}))
	}
	var tlsConfig *tls.Config
	if c.TLSCert != "" {
		if tlsConfig, err = files.ServerTLS(c.TLSCert, c.TLSKey); err != nil {
			return nil, err
		}
		serverOptions = append(serverOptions, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	listener, err := net.Listen("tcp", c.Bind)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %v", c.Bind, reason.Of(err))
	}
	server := grpc.NewServer(serverOptions...)
	echopb.RegisterEchoServiceServer(server, Service{})
	// The standard health service, as the Python echo serves it: SERVING for the server ("") and the echo service.
	healthServer := health.NewServer()
	healthServer.SetServingStatus(echopb.EchoService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(server, healthServer)
	if c.Reflection {
		reflection.Register(server)
	}
	go func() { _ = server.Serve(listener) }()
	s := &Server{Ready: map[string]any{
		"event": "ready", "port": listener.Addr().(*net.TCPAddr).Port, "bind": c.Bind, "pid": os.Getpid(),
		"tls": tlsConfig != nil, "reflection": c.Reflection, "max_message_bytes": c.MaxMessageBytes,
		"labkit_version": c.Version, "grpc_go_version": grpc.Version, "go_version": runtime.Version(),
		"impl": "go", "grpc_options": values.JSON(),
	}}
	s.closers = append(s.closers, func() { StopGRPC(server, grace) })
	if err := s.startSideEndpoints(&c, host, tlsConfig, grace); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// startSideEndpoints starts the raw TCP echo and the HTTP/2 endpoint when asked, adding their ports to the ready line.
func (s *Server) startSideEndpoints(c *ServerConfig, host string, tlsConfig *tls.Config, grace time.Duration) error {
	if c.Given["tcp-echo-port"] {
		tcpEcho, err := ListenTCPEcho(net.JoinHostPort(host, fmt.Sprint(c.TCPEchoPort)), c.MaxMessageBytes)
		if err != nil {
			return fmt.Errorf("cannot serve the TCP echo on %s port %d: %v", host, c.TCPEchoPort, reason.Of(err))
		}
		s.closers = append(s.closers, tcpEcho.Close)
		s.Ready["tcp_echo_port"] = tcpEcho.Port()
	}
	if c.Given["http2-port"] {
		h2, err := ListenHTTP2(net.JoinHostPort(host, fmt.Sprint(c.HTTP2Port)), c.MaxUploadBytes, tlsConfig)
		if err != nil {
			return fmt.Errorf("cannot serve HTTP/2 on %s port %d: %v", host, c.HTTP2Port, reason.Of(err))
		}
		s.closers = append(s.closers, func() { h2.Close(grace) })
		s.Ready["http2_port"], s.Ready["max_upload_bytes"], s.Ready["http2_window_bytes"] = h2.Port(), c.MaxUploadBytes, WindowBytes
	}
	return nil
}

// Stop stops the side endpoints, then the gRPC server, letting calls in flight finish within the grace.
func (s *Server) Stop() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// StopGRPC lets calls in flight finish for up to grace, then stops hard.
func StopGRPC(server *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() { server.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		server.Stop()
	}
}
