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
// many writes they left. Each connection it wraps is parsed on its own, from its preface on, so that an old
// connection's last writes (a GOAWAY after a reconnect) are never read as part of the new one's frames; the
// counts are the sum over the connections.
type FrameCounter struct {
	mu     sync.Mutex
	counts FrameCounts
}

// frameParser follows one connection's bytes: the preface, then frame headers and the payloads between them.
type frameParser struct {
	preface  int    // bytes of the client preface still to skip
	header   []byte // a frame header split across writes, as far as it came
	skipping int64  // payload bytes of the current frame still to pass over
}

func newFrameParser() *frameParser { return &frameParser{preface: len(clientPreface)} }

// NewFrameCounter counts nothing yet.
func NewFrameCounter() *FrameCounter { return &FrameCounter{} }

// Counts so far.
func (f *FrameCounter) Counts() FrameCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// parse reads p, the next bytes of its connection, and says what they held: the frames whose headers ended in
// p, and the DATA frames among them.
func (c *frameParser) parse(p []byte) (frames, dataFrames int64) {
	for len(p) > 0 {
		switch {
		case c.preface > 0:
			n := min(c.preface, len(p))
			c.preface -= n
			p = p[n:]
		case c.skipping > 0:
			n := min(c.skipping, int64(len(p)))
			c.skipping -= n
			p = p[n:]
		default:
			n := min(frameHeaderBytes-len(c.header), len(p))
			c.header = append(c.header, p[:n]...)
			p = p[n:]
			if len(c.header) == frameHeaderBytes {
				frames++
				if c.header[3] == dataFrameType {
					dataFrames++
				}
				c.skipping = int64(c.header[0])<<16 | int64(c.header[1])<<8 | int64(c.header[2])
				c.header = c.header[:0]
			}
		}
	}
	return frames, dataFrames
}

// add counts one write of a connection.
func (f *FrameCounter) add(frames, dataFrames int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.Writes++
	f.counts.Frames += frames
	f.counts.DataFrames += dataFrames
}

// Wrap is conn with every write counted, parsed from its own preface on.
func (f *FrameCounter) Wrap(conn net.Conn) net.Conn {
	return &countedConn{Conn: conn, counter: f, parser: newFrameParser()}
}

type countedConn struct {
	net.Conn
	counter *FrameCounter
	mu      sync.Mutex // the parser's: writes to one connection could come from more than one goroutine
	parser  *frameParser
}

// Write counts p before it goes: counted after, the server's answer to the last bytes could reach the agent,
// which then reads the counts, before this goroutine had counted them. A Write that fails has lost the
// connection, whatever it counted.
func (c *countedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	frames, dataFrames := c.parser.parse(p)
	c.counter.add(frames, dataFrames)
	c.mu.Unlock()
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
