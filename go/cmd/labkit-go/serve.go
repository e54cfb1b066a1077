package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // answer gzip-compressed calls (compression=gzip on the client)
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"labkit/go/echopb"
	"labkit/go/internal/address"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
)

const (
	defaultMaxMessageBytes = 4 << 20 // gRPC's own default receive limit, as the Python server
	defaultMaxUploadBytes  = 1 << 30
)

type serveFlags struct {
	bind, tlsCert, tlsKey, grace string
	maxMessage, maxUpload        int64
	tcpEchoPort, http2Port       int
	permitKeepaliveMs            int
	reflection, noReflection     bool
	grpcOptions                  repeated
	given                        map[string]bool // flags set on the command line
}

func serveCommand(flags *flag.FlagSet, args []string) error {
	var f serveFlags
	flags.StringVar(&f.bind, "bind", "", "HOST:PORT to listen on; port 0 picks a free port")
	flags.Int64Var(&f.maxMessage, "max-message-bytes", defaultMaxMessageBytes, fmt.Sprintf("largest message accepted; larger ones get RESOURCE_EXHAUSTED (at most %d)", limits.MaxMessageBytes))
	flags.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate chain; serve TLS only")
	flags.StringVar(&f.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	flags.BoolVar(&f.reflection, "reflection", true, "serve gRPC reflection (grpcurl, ghz)")
	flags.BoolVar(&f.noReflection, "no-reflection", false, "do not serve gRPC reflection")
	flags.StringVar(&f.grace, "grace", "2s", "time in-flight calls get to finish on stop"+atMost)
	flags.IntVar(&f.permitKeepaliveMs, "permit-keepalive-ms", 0, fmt.Sprintf("accept client keepalive pings this often, also between calls (at most %d)", limits.MaxKeepaliveMs))
	// The side endpoints are served when their flag is given (see f.given): port 0 picks a free one.
	flags.IntVar(&f.tcpEchoPort, "tcp-echo-port", 0, "also serve the raw TCP echo on this port of the --bind host (0: a free one)")
	flags.IntVar(&f.http2Port, "http2-port", 0, "also serve POST /echo and /upload over HTTP/2 on this port (0: a free one)")
	flags.Int64Var(&f.maxUpload, "max-upload-bytes", defaultMaxUploadBytes, fmt.Sprintf("largest HTTP/2 upload body accepted; larger ones get 413 (at most %d)", limits.MaxFileBytes))
	flags.Var(&f.grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable)")
	if err := parse(flags, args); err != nil {
		return err
	}
	f.given = givenFlags(flags)
	return f.run()
}

func (f *serveFlags) check() (host string, grace time.Duration, err error) {
	if f.bind == "" {
		return "", 0, fmt.Errorf("--bind HOST:PORT is required")
	}
	if host, _, err = address.Parse(f.bind, true); err != nil {
		return "", 0, fmt.Errorf("--bind: %v", err)
	}
	host = strings.Trim(host, "[]") // net.JoinHostPort adds the brackets back
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return "", 0, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if f.maxMessage < 1 || f.maxMessage > limits.MaxMessageBytes {
		return "", 0, fmt.Errorf("max message size must be between 1 byte and %d, not %d", limits.MaxMessageBytes, f.maxMessage)
	}
	if err := f.checkSideFlags(); err != nil {
		return "", 0, err
	}
	if grace, err = boundedDuration("grace", f.grace); err != nil {
		return "", 0, err
	}
	return host, grace, nil
}

// checkSideFlags holds the flags of the side endpoints to the ranges the Python CLI's click types allow.
func (f *serveFlags) checkSideFlags() error {
	for _, side := range []struct {
		name string
		port int
	}{{"tcp-echo-port", f.tcpEchoPort}, {"http2-port", f.http2Port}} {
		if side.port < 0 || side.port > 65535 {
			return fmt.Errorf("--%s %d is out of range [0, 65535]", side.name, side.port)
		}
	}
	if f.given["permit-keepalive-ms"] && (f.permitKeepaliveMs < 1 || f.permitKeepaliveMs > limits.MaxKeepaliveMs) {
		return fmt.Errorf("--permit-keepalive-ms must be between 1 and %d, not %d", limits.MaxKeepaliveMs, f.permitKeepaliveMs)
	}
	if f.maxUpload < 0 || f.maxUpload > limits.MaxFileBytes {
		return fmt.Errorf("--max-upload-bytes must be between 0 and %d, not %d", limits.MaxFileBytes, f.maxUpload)
	}
	if f.given["max-upload-bytes"] && !f.given["http2-port"] {
		return fmt.Errorf("--max-upload-bytes bounds the HTTP/2 endpoint; give --http2-port too")
	}
	return nil
}

func (f *serveFlags) run() error {
	host, grace, err := f.check()
	if err != nil {
		return err
	}
	values, err := options.Parse(f.grpcOptions, "server")
	if err != nil {
		return err
	}
	serverOptions, err := values.ServerOptions(int(f.maxMessage))
	if err != nil {
		return err
	}
	if f.permitKeepaliveMs > 0 {
		serverOptions = append(serverOptions, grpc.KeepaliveEnforcementPolicy(keepaliveEnforcement(f.permitKeepaliveMs)))
	}
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		pair, err := loadKeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return err
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		serverOptions = append(serverOptions, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	// Handlers before listening: a parent may signal as soon as it has read the ready line. Notify
	// also undoes an inherited SIG_IGN, as a background job's SIGINT is.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	listener, err := net.Listen("tcp", f.bind)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v", f.bind, unwrapSyscall(err))
	}
	server := grpc.NewServer(serverOptions...)
	echopb.RegisterEchoServiceServer(server, echo.Service{})
	// The standard health service, as the Python echo serves it: SERVING for the server ("") and the echo service.
	healthServer := health.NewServer()
	healthServer.SetServingStatus(echopb.EchoService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(server, healthServer)
	reflectionOn := f.reflection && !f.noReflection
	if reflectionOn {
		reflection.Register(server)
	}
	go func() { _ = server.Serve(listener) }()
	ready := f.readyLine(listener, tlsConfig != nil, reflectionOn, values)
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	closers = append(closers, func() { stopGracefully(server, grace) })
	if err := f.startSideEndpoints(host, tlsConfig, grace, ready, &closers); err != nil {
		return err
	}
	started := time.Now()
	line, _ := json.Marshal(ready)
	fmt.Println(string(line))
	received := <-stop
	fmt.Fprintf(os.Stderr, "labkit-go serve: stopped on %s after %.1f s\n", signalName(received), time.Since(started).Seconds())
	return nil
}

func (f *serveFlags) readyLine(listener net.Listener, tlsOn, reflectionOn bool, values options.Values) map[string]any {
	return map[string]any{
		"event": "ready", "port": listener.Addr().(*net.TCPAddr).Port, "bind": f.bind, "pid": os.Getpid(),
		"tls": tlsOn, "reflection": reflectionOn, "max_message_bytes": f.maxMessage,
		"labkit_version": version, "grpc_go_version": grpc.Version, "go_version": runtime.Version(),
		"impl": "go", "grpc_options": values.JSON(),
	}
}

// startSideEndpoints starts the raw TCP echo and the HTTP/2 endpoint when asked, adding their ports to the ready line.
func (f *serveFlags) startSideEndpoints(host string, tlsConfig *tls.Config, grace time.Duration, ready map[string]any,
	closers *[]func()) error {
	if f.given["tcp-echo-port"] {
		tcpEcho, err := echo.ListenTCPEcho(net.JoinHostPort(host, fmt.Sprint(f.tcpEchoPort)), f.maxMessage)
		if err != nil {
			return fmt.Errorf("cannot serve the TCP echo on %s port %d: %v", host, f.tcpEchoPort, unwrapSyscall(err))
		}
		*closers = append(*closers, tcpEcho.Close)
		ready["tcp_echo_port"] = tcpEcho.Port()
	}
	if f.given["http2-port"] {
		h2, err := echo.ListenHTTP2(net.JoinHostPort(host, fmt.Sprint(f.http2Port)), f.maxUpload, tlsConfig)
		if err != nil {
			return fmt.Errorf("cannot serve HTTP/2 on %s port %d: %v", host, f.http2Port, unwrapSyscall(err))
		}
		*closers = append(*closers, func() { h2.Close(grace) })
		ready["http2_port"], ready["max_upload_bytes"], ready["http2_window_bytes"] = h2.Port(), f.maxUpload, echo.WindowBytes
	}
	return nil
}

// stopGracefully lets calls in flight finish for up to grace, then stops hard.
func stopGracefully(server *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() { server.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		server.Stop()
	}
}

// unwrapSyscall gives the operating system's reason ("address already in use") without Go's wrapping.
func unwrapSyscall(err error) error {
	if op, ok := err.(*net.OpError); ok && op.Err != nil {
		return op.Err
	}
	return err
}
