package echo

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// TCPEchoReplyBytes is the size of a TCP echo reply: the length and two stamps.
const TCPEchoReplyBytes = 20

// TCPEcho is the raw TCP echo of labkit/echo/tcp_echo.py: a request is a 4-byte big-endian
// length N and N bytes, the reply the 4-byte N and the server's wall clock (8-byte big-endian ns
// since the epoch) when the request's last byte was read and when the reply was written. A request
// longer than the bound is refused before its payload is read: one line on stderr, that connection
// closed.
type TCPEcho struct {
	listener net.Listener
	max      int64
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	done     sync.WaitGroup
}

// ListenTCPEcho listens on address and serves until Close.
func ListenTCPEcho(address string, maxMessageBytes int64) (*TCPEcho, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	e := &TCPEcho{listener: listener, max: maxMessageBytes, conns: map[net.Conn]struct{}{}}
	e.done.Add(1)
	go e.accept()
	return e, nil
}

// Port is the port it listens on.
func (e *TCPEcho) Port() int { return e.listener.Addr().(*net.TCPAddr).Port }

func (e *TCPEcho) accept() {
	defer e.done.Done()
	for {
		conn, err := e.listener.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[conn] = struct{}{}
		e.mu.Unlock()
		e.done.Add(1)
		go e.serve(conn)
	}
}

func (e *TCPEcho) serve(conn net.Conn) {
	defer e.done.Done()
	defer func() {
		e.mu.Lock()
		delete(e.conns, conn)
		e.mu.Unlock()
		conn.Close()
	}()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true) // the 4-byte reply must not wait for Nagle
	}
	header, reply := make([]byte, 4), make([]byte, TCPEchoReplyBytes)
	for {
		if _, err := io.ReadFull(conn, header); err != nil {
			return
		}
		length := binary.BigEndian.Uint32(header)
		if int64(length) > e.max {
			fmt.Fprintf(os.Stderr, "labkit-go tcp echo: refused a %d-byte request from %s (bound %d bytes)\n", length, conn.RemoteAddr(), e.max)
			return
		}
		if _, err := io.CopyN(io.Discard, conn, int64(length)); err != nil {
			return
		}
		received := time.Now()
		binary.BigEndian.PutUint32(reply, length)
		binary.BigEndian.PutUint64(reply[4:], uint64(received.UnixNano()))
		binary.BigEndian.PutUint64(reply[12:], uint64(received.UnixNano()+time.Since(received).Nanoseconds()))
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}

// Close stops listening, closes every open connection and waits for their goroutines.
func (e *TCPEcho) Close() {
	e.listener.Close()
	e.mu.Lock()
	for conn := range e.conns {
		conn.Close()
	}
	e.mu.Unlock()
	e.done.Wait()
}
