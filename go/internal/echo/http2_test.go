package echo

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// failAfter bounds a wait that should end at once, so that a broken bound fails the test instead
// of hanging it; nothing is timed against it.
const failAfter = 20 * time.Second

// TestIdleConnectionsAreBoundedAndClosedWhenIdle opens more connections than the endpoint serves:
// the ones beyond the bound are closed as they are accepted (each read ends at EOF), the served
// ones stay open until they have been idle for the idle timeout (then GOAWAY and close), and then
// a connection is served again.
func TestIdleConnectionsAreBoundedAndClosedWhenIdle(t *testing.T) {
	const bound, extra = 8, 5
	server, err := listenHTTP2("127.0.0.1:0", 1<<20, nil, bound, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close(0)
	address := server.listener.Addr().String()
	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	// Dialled one after another: the listen queue hands them to Accept in this order.
	for i := 0; i < bound+extra; i++ {
		conn, err := net.Dial("tcp", address)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	// Each of the extra ones is closed by the server: reading ends at EOF.
	for i, conn := range conns[bound:] {
		if err := readUntilClosed(conn); err != nil {
			t.Fatalf("connection %d beyond the bound of %d: %v", bound+i+1, bound, err)
		}
	}
	// The served ones answer as HTTP/2 connections (SETTINGS), then, with no stream, are closed by the
	// idle timeout.
	for i, conn := range conns[:bound] {
		if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
			t.Fatalf("served connection %d: %v", i+1, err)
		}
		framer := http2.NewFramer(conn, conn)
		if err := framer.WriteSettings(); err != nil {
			t.Fatalf("served connection %d: %v", i+1, err)
		}
		if frame, err := framer.ReadFrame(); err != nil || frame.Header().Type != http2.FrameSettings {
			t.Fatalf("served connection %d: no SETTINGS from the server (%v)", i+1, err)
		}
	}
	for i, conn := range conns[:bound] {
		if err := readUntilClosed(conn); err != nil {
			t.Fatalf("served connection %d was not closed when idle: %v", i+1, err)
		}
	}
	// Their slots are free again: a new connection is served (its SETTINGS arrive), not closed.
	var conn net.Conn
	for {
		if conn, err = net.Dial("tcp", address); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		io.WriteString(conn, http2.ClientPreface)
		framer := http2.NewFramer(conn, conn)
		framer.WriteSettings()
		conn.SetReadDeadline(time.Now().Add(failAfter))
		if frame, err := framer.ReadFrame(); err == nil && frame.Header().Type == http2.FrameSettings {
			break
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a connection after the idle ones were closed got no answer")
		}
		// EOF: the server had not yet seen every idle connection end; they are closed, so it will.
	}
}

// readUntilClosed reads (GOAWAY and other frames included) until the server closes the connection.
func readUntilClosed(conn net.Conn) error {
	conn.SetReadDeadline(time.Now().Add(failAfter))
	_, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errors.New("still open")
	}
	return nil // EOF (io.Copy's nil) or a reset: closed
}
