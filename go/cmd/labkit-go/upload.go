package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/address"
	"labkit/go/internal/echo"
	"labkit/go/internal/files"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
	"labkit/go/internal/reason"
)

// uploadAgent is the client side of `labkit upload` (labkit/echo/upload_agent.py): one cell's uploads of
// a file, timed from the first byte handed to the transport to the server's acknowledgement, one JSON
// line each, on a connection opened and warmed before the first timed upload.
type uploadAgent struct {
	transport, target, path, sha, timeoutText, tlsCA, tlsServerName string
	chunk                                                           int64
	repeats, warmup                                                 int
	declared                                                        int64
	timeout                                                         time.Duration
	data                                                            []byte
	grpcOptions                                                     repeated
	values                                                          options.Values
}

func uploadAgentCommand(flags *flag.FlagSet, args []string) error {
	a := &uploadAgent{declared: -1}
	flags.StringVar(&a.transport, "transport", "", "grpc or http2")
	flags.StringVar(&a.target, "target", "", "HOST:PORT of the gRPC or HTTP/2 endpoint")
	flags.StringVar(&a.path, "file", "", "the file to upload")
	flags.StringVar(&a.sha, "sha256", "", "the file's SHA-256; a file that differs is refused")
	flags.Int64Var(&a.chunk, "chunk-size", 0, fmt.Sprintf("bytes per chunk (at most %d)", limits.MaxRequestBytes))
	flags.IntVar(&a.repeats, "repeats", 1, fmt.Sprintf("uploads to make (at most %d)", limits.MaxRepeats))
	flags.IntVar(&a.warmup, "warmup", 1, fmt.Sprintf("untimed 1-byte uploads first (at most %d)", limits.MaxWarmup))
	flags.StringVar(&a.timeoutText, "timeout", "600s", "deadline of each upload"+atMost)
	flags.StringVar(&a.tlsCA, "tls-ca", "", "PEM root certificate; use TLS")
	flags.StringVar(&a.tlsServerName, "tls-server-name", "", "name to verify in the server certificate instead of HOST")
	flags.Int64Var(&a.declared, "declare-length", -1, "declare this length to the server instead of the file's")
	flags.Var(&a.grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable; --transport grpc)")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := a.check(); err != nil {
		return err
	}
	exitOnSignal("upload-agent") // its rows are written as each upload ends: nothing is left to flush
	if a.transport == "grpc" {
		return a.runGRPC()
	}
	return a.runHTTP2()
}

func (a *uploadAgent) check() error {
	if a.transport != "grpc" && a.transport != "http2" {
		return fmt.Errorf("--transport is grpc or http2, not %q", a.transport)
	}
	if a.target == "" {
		return fmt.Errorf("--target HOST:PORT is required")
	}
	if _, _, err := address.Parse(a.target, false); err != nil {
		return fmt.Errorf("--target: %v", err)
	}
	if a.chunk < 1 || a.chunk > limits.MaxRequestBytes || a.repeats < 1 || a.repeats > limits.MaxRepeats ||
		a.warmup < 0 || a.warmup > limits.MaxWarmup {
		return fmt.Errorf("--chunk-size must be between 1 and %d, --repeats between 1 and %d, --warmup between 0 and %d",
			limits.MaxRequestBytes, limits.MaxRepeats, limits.MaxWarmup)
	}
	var err error
	if a.values, err = options.Parse(a.grpcOptions, "client"); err != nil {
		return err
	}
	if len(a.values) > 0 && a.transport != "grpc" {
		return fmt.Errorf("--grpc-option applies to --transport grpc only")
	}
	if a.timeout, err = limits.ParseDuration("timeout", a.timeoutText); err != nil {
		return err
	}
	if a.data, err = os.ReadFile(a.path); err != nil {
		return fmt.Errorf("cannot read %s: %v", a.path, unwrapPath(err))
	}
	sum := sha256.Sum256(a.data)
	actual := hex.EncodeToString(sum[:])
	if a.sha != "" && strings.ToLower(a.sha) != actual {
		return fmt.Errorf("%s does not have sha256 %s: the file changed on this host", a.path, a.sha)
	}
	a.sha = actual
	return nil
}

func unwrapPath(err error) error {
	if p, ok := err.(*os.PathError); ok {
		return p.Err
	}
	return err
}

func (a *uploadAgent) declaredLength() string {
	if a.declared >= 0 {
		return strconv.FormatInt(a.declared, 10)
	}
	return strconv.Itoa(len(a.data))
}

func emit(row map[string]any) {
	line, _ := json.Marshal(row)
	fmt.Println(string(line))
}

func newUploadRow(seq int, a *uploadAgent) map[string]any {
	row := map[string]any{"event": "upload", "seq": seq, "bytes_sent": len(a.data), "chunks": (int64(len(a.data)) + a.chunk - 1) / a.chunk}
	for _, key := range []string{"t_start_utc_ns", "seconds", "mb_per_s", "bytes_acked", "client_cpu_s", "client_cpu_user_s",
		"client_cpu_sys_s", "server_cpu_s", "server_cpu_user_s", "server_cpu_sys_s", "ok", "error", "status"} {
		row[key] = nil
	}
	return row
}

// finish fills in what every upload row has, as Python's _finish: time, CPU of both ends, the checks.
func (a *uploadAgent) finish(row map[string]any, elapsed time.Duration, cpuStart, cpuEnd echo.CPUSample, acked *int64,
	ackedSHA string, server map[string]any, problems []string) {
	row["seconds"] = elapsed.Seconds()
	for key, value := range cpuEnd.Since(cpuStart) {
		row["client_"+key] = value
	}
	for _, key := range []string{"cpu_s", "cpu_user_s", "cpu_sys_s"} {
		row["server_"+key] = server[key]
	}
	if acked != nil {
		row["bytes_acked"] = *acked
		if *acked != int64(len(a.data)) {
			problems = append(problems, fmt.Sprintf("server acknowledged %d bytes, sent %d", *acked, len(a.data)))
		}
	}
	if ackedSHA != "" && ackedSHA != a.sha {
		problems = append(problems, fmt.Sprintf("server computed sha256 %s, sent %s", ackedSHA, a.sha))
	}
	row["ok"] = len(problems) == 0
	if len(problems) > 0 {
		row["error"] = strings.Join(problems, "; ")
	} else if elapsed > 0 {
		row["mb_per_s"] = float64(len(a.data)) / elapsed.Seconds() / 1e6
	}
}

func (a *uploadAgent) runGRPC() error {
	started := time.Now()
	dial, err := echo.Dial{TLSCA: a.tlsCA, TLSServerName: a.tlsServerName, Options: a.values}.DialOptions()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(a.target, dial...)
	if err != nil {
		return fmt.Errorf("cannot use target %s: %v", a.target, err)
	}
	defer conn.Close()
	stub := echopb.NewEchoServiceClient(conn)
	if err := waitReady(conn, a.timeout); err != nil {
		return fmt.Errorf("cannot connect to the gRPC server at %s within %g s", a.target, a.timeout.Seconds())
	}
	connected := time.Now()
	for range a.warmup {
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		_, err := a.grpcUpload(ctx, stub, []byte{0}, metadata.MD{})
		cancel()
		if err != nil {
			return fmt.Errorf("the warm-up upload to %s failed: %v", a.target, status.Convert(err).Message())
		}
	}
	emit(map[string]any{"event": "ready", "transport": "grpc", "target": a.target,
		"connect_s": connected.Sub(started).Seconds(), "warmup_s": time.Since(connected).Seconds()})
	md := metadata.Pairs(echo.ExpectedLengthKey, a.declaredLength(), echo.ExpectedSHA256Key, a.sha)
	for seq := range a.repeats {
		row := newUploadRow(seq, a)
		a.finishGRPC(row, stub, md)
		emit(row)
	}
	return nil
}

// finishGRPC makes one timed Upload and fills in its row: the timer stops at the server's UploadStatus.
func (a *uploadAgent) finishGRPC(row map[string]any, stub echopb.EchoServiceClient, md metadata.MD) {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	var trailer metadata.MD
	cpuStart := echo.CPUNow()
	row["t_start_utc_ns"] = time.Now().UnixNano()
	start := time.Now()
	result, err := a.grpcUpload(ctx, stub, a.data, md, grpc.Trailer(&trailer))
	elapsed, cpuEnd := time.Since(start), echo.CPUNow()
	if err != nil {
		st := status.Convert(err)
		row["status"] = echo.CodeName(st.Code())
		problem := fmt.Sprintf("%s: %s", echo.CodeName(st.Code()), st.Message())
		a.finish(row, elapsed, cpuStart, cpuEnd, nil, "", map[string]any{}, []string{problem})
		return
	}
	row["status"] = "OK"
	var problems []string
	if result.GetCode() != echopb.UploadStatusCode_OK {
		reason := result.GetMessage()
		if reason == "" {
			reason = result.GetCode().String()
		}
		problems = append(problems, "server: "+reason)
	}
	received := result.GetBytesReceived()
	a.finish(row, elapsed, cpuStart, cpuEnd, &received, result.GetSha256(), serverCPU(trailer), problems)
}

// serverCPU reads the server's CPU seconds from the labkit-server-cpu-* trailers (absent ones stay null).
func serverCPU(trailer metadata.MD) map[string]any {
	server := map[string]any{}
	for _, key := range []string{"cpu_s", "cpu_user_s", "cpu_sys_s"} {
		if values := trailer.Get("labkit-server-" + strings.ReplaceAll(key, "_", "-")); len(values) > 0 {
			if v, err := strconv.ParseFloat(values[0], 64); err == nil {
				server[key] = v
			}
		}
	}
	return server
}

// waitReady opens the channel's connection and waits until it is READY, as Python's
// channel_ready_future: the connection is made before the first upload, outside every timer.
func waitReady(conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(ctx, state) {
			return ctx.Err()
		}
	}
	return nil
}

// grpcUpload sends data in chunks on one Upload stream and waits for the server's status.
func (a *uploadAgent) grpcUpload(ctx context.Context, stub echopb.EchoServiceClient, data []byte, md metadata.MD,
	opts ...grpc.CallOption) (*echopb.UploadStatus, error) {
	stream, err := stub.Upload(metadata.NewOutgoingContext(ctx, md), opts...)
	if err != nil {
		return nil, err
	}
	for offset := int64(0); offset < int64(len(data)); offset += a.chunk {
		if err := stream.Send(&echopb.Chunk{Content: data[offset:min(offset+a.chunk, int64(len(data)))]}); err != nil {
			break // the status below says why
		}
	}
	return stream.CloseAndRecv()
}

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
}

func (a *uploadAgent) newH2Conn() (*h2Conn, error) {
	c := &h2Conn{target: a.target, url: "http://" + a.target + echo.UploadPath, timeout: a.timeout, transport: &http2.Transport{}}
	if a.tlsCA == "" {
		return c, nil
	}
	var err error
	if c.tls, err = files.ClientTLS(a.tlsCA, a.tlsServerName); err != nil {
		return nil, err
	}
	if c.tls.ServerName == "" { // the host itself, an IP address checked against IP SANs
		host, _, _ := net.SplitHostPort(a.target)
		c.tls.ServerName = host
	}
	c.tls.NextProtos = []string{"h2"}
	c.url = "https://" + a.target + echo.UploadPath
	return c, nil
}

// connect dials, shakes hands, and waits for a PING's answer, which comes after the server's SETTINGS.
func (c *h2Conn) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
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
	if c.cc, err = c.transport.NewClientConn(conn); err == nil {
		err = c.cc.Ping(ctx)
	}
	if err != nil {
		conn.Close()
		c.cc = nil
		return fmt.Errorf("HTTP/2 with %s failed: %v", c.target, err)
	}
	return nil
}

func (c *h2Conn) usable() bool { return c.cc != nil && c.cc.CanTakeNewRequest() }

func (c *h2Conn) close() {
	if c.cc != nil {
		c.cc.Close()
		c.cc = nil
	}
}

// upload POSTs data in chunks of chunk bytes and reads the server's whole answer.
func (c *h2Conn) upload(data []byte, chunk int64, declared, sha string) (int, map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
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

func (a *uploadAgent) runHTTP2() error {
	started := time.Now()
	conn, err := a.newH2Conn()
	if err != nil {
		return err
	}
	if err := conn.connect(); err != nil {
		return err
	}
	defer conn.close()
	connected := time.Now()
	for range a.warmup {
		if code, body, err := conn.upload([]byte{0}, 1, "1", ""); err != nil || code != http.StatusOK {
			return fmt.Errorf("the warm-up upload to %s failed: %s", a.target, httpFailure(code, body, err))
		}
	}
	emit(map[string]any{"event": "ready", "transport": "http2", "target": a.target,
		"connect_s": connected.Sub(started).Seconds(), "warmup_s": time.Since(connected).Seconds()})
	for seq := range a.repeats {
		row := newUploadRow(seq, a)
		if !conn.usable() { // the previous upload lost the connection: a new one, outside the timer
			conn.close()
			if err := conn.connect(); err != nil {
				row["ok"], row["error"], row["status"] = false, err.Error(), "connect failed"
				emit(row)
				continue
			}
		}
		a.finishHTTP2(row, conn)
		emit(row)
	}
	return nil
}

// finishHTTP2 makes one timed upload on conn and fills in its row.
func (a *uploadAgent) finishHTTP2(row map[string]any, conn *h2Conn) {
	cpuStart := echo.CPUNow()
	row["t_start_utc_ns"] = time.Now().UnixNano()
	start := time.Now()
	code, body, err := conn.upload(a.data, a.chunk, a.declaredLength(), a.sha)
	elapsed, cpuEnd := time.Since(start), echo.CPUNow()
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
		for _, key := range []string{"cpu_s", "cpu_user_s", "cpu_sys_s"} {
			server[key] = body["server_"+key]
		}
	}
	a.finish(row, elapsed, cpuStart, cpuEnd, acked, ackedSHA, server, problems)
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
