package upload

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// clientPreface opens every HTTP/2 connection a client makes (RFC 9113 §3.4), before its first frame.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

const frameHeaderBytes = 9
const dataFrameType = 0x0

// FrameCounts is what a client has written on its HTTP/2 connection: frames of every type, DATA frames among
// them, and the Write calls that carried them (each one write(2) of the socket, or of TLS records on it).
type FrameCounts struct{ Frames, DataFrames, Writes int64 }

// Sub is the counts since earlier.
func (c FrameCounts) Sub(earlier FrameCounts) FrameCounts {
	return FrameCounts{c.Frames - earlier.Frames, c.DataFrames - earlier.DataFrames, c.Writes - earlier.Writes}
}

// FrameCounter reads the HTTP/2 frame headers out of the bytes a client writes, above TLS where there is TLS,
// so that an upload's frames are counted, not supposed: how many DATA frames its chunks became, and in how
// many writes they left. It follows one connection at a time (the agent's), from its preface on.
type FrameCounter struct {
	mu       sync.Mutex
	counts   FrameCounts
	preface  int    // bytes of the client preface still to skip
	header   []byte // a frame header split across writes, as far as it came
	skipping int64  // payload bytes of the current frame still to pass over
}

// NewFrameCounter counts from a connection's first byte.
func NewFrameCounter() *FrameCounter { return &FrameCounter{preface: len(clientPreface)} }

// Counts so far.
func (f *FrameCounter) Counts() FrameCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// restart follows a new connection (a reconnect between uploads) from its preface; the counts go on.
func (f *FrameCounter) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preface, f.header, f.skipping = len(clientPreface), f.header[:0], 0
}

// Written parses p, the next bytes of the client's side of the connection.
func (f *FrameCounter) Written(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.Writes++
	for len(p) > 0 {
		switch {
		case f.preface > 0:
			n := min(f.preface, len(p))
			f.preface -= n
			p = p[n:]
		case f.skipping > 0:
			n := min(f.skipping, int64(len(p)))
			f.skipping -= n
			p = p[n:]
		default:
			n := min(frameHeaderBytes-len(f.header), len(p))
			f.header = append(f.header, p[:n]...)
			p = p[n:]
			if len(f.header) == frameHeaderBytes {
				f.counts.Frames++
				if f.header[3] == dataFrameType {
					f.counts.DataFrames++
				}
				f.skipping = int64(f.header[0])<<16 | int64(f.header[1])<<8 | int64(f.header[2])
				f.header = f.header[:0]
			}
		}
	}
}

// Wrap is conn with every write counted; a new connection starts from its preface.
func (f *FrameCounter) Wrap(conn net.Conn) net.Conn {
	f.restart()
	return &countedConn{Conn: conn, counter: f}
}

type countedConn struct {
	net.Conn
	counter *FrameCounter
}

// Write counts p before it goes: counted after, the server's answer to the last bytes could reach the agent,
// which then reads the counts, before this goroutine had counted them. A Write that fails has lost the
// connection, whatever it counted.
func (c *countedConn) Write(p []byte) (int, error) {
	c.counter.Written(p)
	return c.Conn.Write(p)
}

// Credentials wraps gRPC transport credentials so that the connection they hand gRPC (TLS's, or the plain one)
// is counted.
func (f *FrameCounter) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &countedCredentials{TransportCredentials: inner, counter: f}
}

type countedCredentials struct {
	credentials.TransportCredentials
	counter *FrameCounter
}

func (c *countedCredentials) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return conn, info, err
	}
	return c.counter.Wrap(conn), info, nil
}

func (c *countedCredentials) Clone() credentials.TransportCredentials {
	return &countedCredentials{TransportCredentials: c.TransportCredentials.Clone(), counter: c.counter}
}
