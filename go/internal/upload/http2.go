package upload

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http2"

	"labkit/go/internal/echo"
	"labkit/go/internal/files"
	"labkit/go/internal/reason"
)

// chunkReader hands the body to the HTTP/2 transport one chunk per Read, as Python's client sends one DATA frame per chunk.
type chunkReader struct {
	data  []byte
	chunk int64
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data[:min(int64(len(r.data)), r.chunk)])
	r.data = r.data[n:]
	return n, nil
}

// h2Conn is the agent's one HTTP/2 connection, as Python's Http2Client: h2c with prior knowledge or
// TLS with ALPN h2, opened (and its SETTINGS received) before any timer starts, re-opened only
// between uploads when one lost it.
type h2Conn struct {
	target, url string
	tls         *tls.Config // nil: h2c
	timeout     time.Duration
	transport   *http2.Transport
	cc          *http2.ClientConn
	frames      *FrameCounter
}

func (a *Agent) newH2Conn() (*h2Conn, error) {
	c := &h2Conn{target: a.Target, url: "http://" + a.Target + echo.UploadPath, timeout: a.timeout, transport: &http2.Transport{},
		frames: a.frames}
	if a.TLSCA == "" {
		return c, nil
	}
	var err error
	if c.tls, err = files.ClientTLS(a.TLSCA, a.TLSServerName); err != nil {
		return nil, err
	}
	if c.tls.ServerName == "" { // the host itself, an IP address checked against IP SANs
		host, _, _ := net.SplitHostPort(a.Target)
		c.tls.ServerName = host
	}
	c.tls.NextProtos = []string{"h2"}
	c.url = "https://" + a.Target + echo.UploadPath
	return c, nil
}

// connect dials, shakes hands, and waits for a PING's answer, which comes after the server's SETTINGS.
func (c *h2Conn) connect(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", c.target)
	if err != nil {
		return fmt.Errorf("cannot connect to %s: %v", c.target, reason.Of(err))
	}
	if c.tls != nil {
		secure := tls.Client(conn, c.tls)
		if err := secure.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("TLS with %s failed: %v", c.target, err)
		}
		if secure.ConnectionState().NegotiatedProtocol != "h2" {
			secure.Close()
			return fmt.Errorf("%s did not agree to HTTP/2 in TLS ALPN", c.target)
		}
		conn = secure
	}
	if c.cc, err = c.transport.NewClientConn(c.frames.Wrap(conn)); err == nil {
		err = c.cc.Ping(ctx)
	}
	if err != nil {
		conn.Close()
		c.cc = nil
		return fmt.Errorf("HTTP/2 with %s failed: %v", c.target, err)
	}
	return nil
}

// reconnectIfLost opens a new connection, outside the timer, when the previous upload lost this one.
func (c *h2Conn) reconnectIfLost(ctx context.Context) error {
	if c.cc != nil && c.cc.CanTakeNewRequest() {
		return nil
	}
	c.close()
	return c.connect(ctx)
}

func (c *h2Conn) close() {
	if c.cc != nil {
		c.cc.Close()
		c.cc = nil
	}
}

// upload POSTs data in chunks of chunk bytes and reads the server's whole answer.
func (c *h2Conn) upload(parent context.Context, data []byte, chunk int64, declared, sha string) (int, map[string]any, error) {
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	request, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, &chunkReader{data: data, chunk: chunk})
	request.ContentLength = int64(len(data))
	request.Header.Set(echo.ExpectedLengthKey, declared)
	if sha != "" {
		request.Header.Set(echo.ExpectedSHA256Key, sha)
	}
	response, err := c.cc.RoundTrip(request)
	if err != nil {
		return 0, nil, err
	}
	defer response.Body.Close()
	payload, err := io.ReadAll(response.Body)
	if err != nil {
		return 0, nil, err
	}
	body := map[string]any{}
	if json.Unmarshal(payload, &body) != nil {
		body["error"] = string(payload[:min(len(payload), 200)]) // as Python's Http2Reply.json
	}
	return response.StatusCode, body, nil
}

func (a *Agent) runHTTP2(ctx context.Context) error {
	started := time.Now()
	conn, err := a.newH2Conn()
	if err != nil {
		return err
	}
	if err := conn.connect(ctx); err != nil {
		return err
	}
	defer conn.close()
	connected := time.Now()
	for range a.Warmup {
		code, body, err := conn.upload(ctx, []byte{0}, 1, "1", "")
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("the warm-up upload to %s failed: %s", a.Target, httpFailure(code, body, err))
		}
	}
	if err := a.emit(map[string]any{"event": "ready", "transport": "http2", "target": a.Target,
		"connect_s": connected.Sub(started).Seconds(), "warmup_s": time.Since(connected).Seconds()}); err != nil {
		return err
	}
	for seq := range a.Repeats {
		row := a.newRow(seq)
		if err := conn.reconnectIfLost(ctx); err != nil {
			row["ok"], row["error"], row["status"] = false, err.Error(), "connect failed"
		} else {
			a.finishHTTP2(ctx, row, conn)
		}
		if err := a.emitUnlessCancelled(ctx, row); err != nil {
			return err
		}
	}
	return nil
}

// finishHTTP2 makes one timed upload on conn and fills in its row.
func (a *Agent) finishHTTP2(ctx context.Context, row map[string]any, conn *h2Conn) {
	before := a.measure()
	row["t_start_utc_ns"] = time.Now().UnixNano()
	start := time.Now()
	code, body, err := conn.upload(ctx, a.data, a.ChunkSize, a.declaredLength(), a.sha)
	elapsed, after := time.Since(start), a.measure()
	var problems []string
	var acked *int64
	ackedSHA, _ := body["sha256"].(string)
	server := map[string]any{}
	if err != nil {
		row["status"] = "connection failed"
		problems = append(problems, err.Error())
		conn.close()
	} else {
		row["status"] = strconv.Itoa(code)
		if n, ok := body["bytes_received"].(float64); ok {
			received := int64(n)
			acked = &received
		}
		if code != http.StatusOK {
			problems = append(problems, httpFailure(code, body, nil))
		}
		for _, key := range serverKeys {
			server[key] = body["server_"+key]
		}
	}
	a.finish(row, elapsed, before, after, acked, ackedSHA, server, problems)
}

// httpFailure says why an HTTP/2 upload failed, as the Python agent: "HTTP 413: reason".
func httpFailure(code int, body map[string]any, err error) string {
	if err != nil {
		return err.Error()
	}
	reason, found := body["error"]
	if !found {
		reason = "no reason given"
	}
	return fmt.Sprintf("HTTP %d: %v", code, reason)
}
