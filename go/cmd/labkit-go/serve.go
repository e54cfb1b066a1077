package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
)

// serveCommand is `labkit echo serve`: the echo server (go/internal/echo) until SIGTERM or SIGINT.
func serveCommand(flags *flag.FlagSet, args []string) error {
	var c echo.ServerConfig
	var reflection, noReflection bool
	var grpcOptions repeated
	flags.StringVar(&c.Bind, "bind", "", "HOST:PORT to listen on; port 0 picks a free port")
	flags.Int64Var(&c.MaxMessageBytes, "max-message-bytes", echo.DefaultMaxMessageBytes, fmt.Sprintf("largest message accepted; larger ones get RESOURCE_EXHAUSTED (at most %d)", limits.MaxMessageBytes))
	flags.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate chain; serve TLS only")
	flags.StringVar(&c.TLSKey, "tls-key", "", "PEM private key for --tls-cert")
	flags.BoolVar(&reflection, "reflection", true, "serve gRPC reflection (grpcurl, ghz)")
	flags.BoolVar(&noReflection, "no-reflection", false, "do not serve gRPC reflection")
	flags.StringVar(&c.Grace, "grace", "2s", "time in-flight calls get to finish on stop"+atMost)
	flags.IntVar(&c.PermitKeepaliveMs, "permit-keepalive-ms", 0, fmt.Sprintf("accept client keepalive pings this often, also between calls (at most %d)", limits.MaxKeepaliveMs))
	// The side endpoints are served when their flag is given (see c.Given): port 0 picks a free one.
	flags.IntVar(&c.TCPEchoPort, "tcp-echo-port", 0, "also serve the raw TCP echo on this port of the --bind host (0: a free one)")
	flags.IntVar(&c.HTTP2Port, "http2-port", 0, "also serve POST /echo and /upload over HTTP/2 on this port (0: a free one)")
	flags.Int64Var(&c.MaxUploadBytes, "max-upload-bytes", echo.DefaultMaxUploadBytes, fmt.Sprintf("largest HTTP/2 upload body accepted; larger ones get 413 (at most %d)", limits.MaxFileBytes))
	flags.Var(&grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable)")
	if err := parse(flags, args); err != nil {
		return err
	}
	c.Given, c.Reflection, c.GRPCOptions, c.Version = givenFlags(flags), reflection && !noReflection, grpcOptions, version
	// Handlers before listening: a parent may signal as soon as it has read the ready line.
	stop := notifyStop()
	server, err := echo.StartServer(c)
	if err != nil {
		return err
	}
	defer server.Stop()
	return untilStopped("serve", server.Ready, stop)
}

// untilStopped prints a server's ready line and waits for SIGTERM or SIGINT, then says which one came.
func untilStopped(command string, ready map[string]any, stop <-chan os.Signal) error {
	started := time.Now()
	if err := printJSON(ready); err != nil {
		return err
	}
	received := <-stop
	fmt.Fprintf(os.Stderr, "labkit-go %s: stopped on %s after %.1f s\n", command, signalName(received), time.Since(started).Seconds())
	return nil
}
