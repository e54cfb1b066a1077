// Package echotest starts the real echo server of go/internal/echo on loopback for the tests of its clients
// (call, series, upload), as net/http/httptest does for HTTP.
package echotest

import (
	"fmt"
	"testing"

	"labkit/go/internal/echo"
)

// Server is the echo server listening on 127.0.0.1 with the raw TCP echo and the HTTP/2 endpoint, each on a
// free port, stopped when the test ends.
type Server struct {
	*echo.Server
	// Target, TCPEchoTarget and HTTP2Target are HOST:PORT of the gRPC service, the raw TCP echo and HTTP/2.
	Target, TCPEchoTarget, HTTP2Target string
	// Port and TCPEchoPort are the ports of the gRPC service and of the raw TCP echo.
	Port, TCPEchoPort int
}

// Start starts the server; config may change its defaults (a smaller upload bound, TLS).
func Start(t testing.TB, config ...func(*echo.ServerConfig)) *Server {
	t.Helper()
	c := echo.ServerConfig{Bind: "127.0.0.1:0", Grace: "1s", MaxMessageBytes: echo.DefaultMaxMessageBytes,
		MaxUploadBytes: echo.DefaultMaxUploadBytes, Given: map[string]bool{"tcp-echo-port": true, "http2-port": true}}
	for _, change := range config {
		change(&c)
	}
	server, err := echo.StartServer(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	s := &Server{Server: server, Port: server.Ready["port"].(int), TCPEchoPort: server.Ready["tcp_echo_port"].(int)}
	s.Target = fmt.Sprintf("127.0.0.1:%d", s.Port)
	s.TCPEchoTarget = fmt.Sprintf("127.0.0.1:%d", s.TCPEchoPort)
	s.HTTP2Target = fmt.Sprintf("127.0.0.1:%d", server.Ready["http2_port"].(int))
	return s
}

// ClosedPort is HOST:PORT where nothing listens: port 1 on loopback, refused at once.
const ClosedPort = "127.0.0.1:1"
