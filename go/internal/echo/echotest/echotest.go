// Package echotest starts the real echo server of go/internal/echo on loopback for the tests of its clients
// (call, series, upload), as net/http/httptest does for HTTP.
package echotest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

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

// Silent is a server that accepts connections and speaks HTTP/2 far enough for a gRPC client to call (its
// SETTINGS), then never answers: a call to it waits out its deadline. callArrived receives once per call that
// reached it (its HEADERS frame), the moment a test knows a call is in flight.
func Silent(t testing.TB) (target string, callArrived <-chan struct{}) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{}, 16)
	var conns sync.WaitGroup
	t.Cleanup(func() { listener.Close(); conns.Wait() })
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer conn.Close()
				stayQuiet(conn, arrived)
			}()
		}
	}()
	return listener.Addr().String(), arrived
}

// stayQuiet reads the client's preface, sends an empty SETTINGS, and reads frames until the client leaves,
// reporting each HEADERS frame (a call) to arrived.
func stayQuiet(conn net.Conn, arrived chan<- struct{}) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(conn, preface); err != nil {
		return
	}
	framer := http2.NewFramer(conn, conn)
	if framer.WriteSettings() != nil {
		return
	}
	for {
		frame, err := framer.ReadFrame()
		if err != nil {
			return
		}
		if frame.Header().Type == http2.FrameHeaders {
			select {
			case arrived <- struct{}{}:
			default: // nobody waits for more calls than the buffer holds
			}
		}
	}
}

// FailAfter bounds a wait that should end at once, so that a broken stop fails a test instead of hanging it;
// nothing is timed against it.
const FailAfter = 20 * time.Second

// CancelWhen runs run in its own goroutine, cancels its context once ready receives (a call is in flight, a
// row was written), and returns run's error: what a signal does to a client. A run that never gets there, or
// does not stop when cancelled, fails the test.
func CancelWhen(t testing.TB, ready <-chan struct{}, run func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	select {
	case <-ready:
	case <-time.After(FailAfter):
		t.Fatal("the run never got where the test cancels it")
	}
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(FailAfter):
		t.Fatal("the run did not stop when cancelled")
	}
	return nil
}

// JSONLines decodes a client's output, one JSON object per line.
func JSONLines(t testing.TB, text string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" {
			continue
		}
		event := map[string]any{}
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		lines = append(lines, event)
	}
	return lines
}
