package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/options"
	"labkit/go/internal/units"
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

func uploadAgentCommand(args []string) error {
	a := &uploadAgent{declared: -1}
	flags := newFlags("upload-agent")
	flags.StringVar(&a.transport, "transport", "", "grpc or http2")
	flags.StringVar(&a.target, "target", "", "HOST:PORT of the gRPC or HTTP/2 endpoint")
	flags.StringVar(&a.path, "file", "", "the file to upload")
	flags.StringVar(&a.sha, "sha256", "", "the file's SHA-256; a file that differs is refused")
	flags.Int64Var(&a.chunk, "chunk-size", 0, "bytes per chunk")
	flags.IntVar(&a.repeats, "repeats", 1, "uploads to make")
	flags.IntVar(&a.warmup, "warmup", 1, "untimed 1-byte uploads first")
	flags.StringVar(&a.timeoutText, "timeout", "600s", "deadline of each upload")
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
	if a.transport == "grpc" {
		return a.runGRPC()
	}
	return a.runHTTP2()
}

func (a *uploadAgent) check() error {
	if a.transport != "grpc" && a.transport != "http2" {
		return usagef("--transport is grpc or http2, not %q", a.transport)
	}
	if _, _, err := net.SplitHostPort(a.target); err != nil {
		return usagef("--target HOST:PORT is required")
	}
	if a.chunk < 1 || a.repeats < 1 || a.warmup < 0 {
		return usagef("--chunk-size and --repeats must be at least 1, --warmup not negative")
	}
	var err error
	if a.values, err = options.Parse(a.grpcOptions, "client"); err != nil {
		return usageError{err.Error()}
	}
	if len(a.values) > 0 && a.transport != "grpc" {
		return usagef("--grpc-option applies to --transport grpc only")
	}
	if a.timeout, err = units.ParseDuration(a.timeoutText); err != nil {
		return usagef("--timeout: %v", err)
	}
	if a.data, err = os.ReadFile(a.path); err != nil {
		return usagef("cannot read %s: %v", a.path, unwrapPath(err))
	}
	sum := sha256.Sum256(a.data)
	actual := hex.EncodeToString(sum[:])
	if a.sha != "" && strings.ToLower(a.sha) != actual {
		return usagef("%s does not have sha256 %s: the file changed on this host", a.path, a.sha)
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
	dial, err := (&callFlags{tlsCA: a.tlsCA, tlsServerName: a.tlsServerName}).dialOptions(a.values)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(a.target, dial...)
	if err != nil {
		return usagef("cannot use target %s: %v", a.target, err)
	}
	defer conn.Close()
	stub := echopb.NewEchoServiceClient(conn)
	conn.Connect()
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
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		var trailer metadata.MD
		cpuStart := echo.CPUNow()
		row["t_start_utc_ns"] = time.Now().UnixNano()
		start := time.Now()
		result, err := a.grpcUpload(ctx, stub, a.data, md, grpc.Trailer(&trailer))
		elapsed, cpuEnd := time.Since(start), echo.CPUNow()
		cancel()
		var problems []string
		var acked *int64
		ackedSHA := ""
		server := map[string]any{}
		if err != nil {
			st := status.Convert(err)
			row["status"] = codeName(st.Code())
			problems = append(problems, fmt.Sprintf("%s: %s", codeName(st.Code()), st.Message()))
		} else {
			row["status"] = "OK"
			received := result.GetBytesReceived()
			acked, ackedSHA = &received, result.GetSha256()
			if result.GetCode() != echopb.UploadStatusCode_OK {
				problems = append(problems, "server: "+result.GetMessage())
			}
			for _, key := range []string{"cpu_s", "cpu_user_s", "cpu_sys_s"} {
				if values := trailer.Get("labkit-server-" + strings.ReplaceAll(key, "_", "-")); len(values) > 0 {
					if v, err := strconv.ParseFloat(values[0], 64); err == nil {
						server[key] = v
					}
				}
			}
		}
		a.finish(row, elapsed, cpuStart, cpuEnd, acked, ackedSHA, server, problems)
		emit(row)
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

func (a *uploadAgent) http2Client() (*http.Client, string, error) {
	transport := &http2.Transport{}
	scheme := "http"
	if a.tlsCA != "" {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return nil, "", usagef("--tls-ca: %v", unwrapPath(err))
		}
		config, err := rootsConfig(pem, a.tlsServerName)
		if err != nil {
			return nil, "", err
		}
		transport.TLSClientConfig, scheme = config, "https"
	} else {
		// h2c with prior knowledge, as the Python client: no TLS, no upgrade.
		transport.AllowHTTP = true
		transport.DialTLSContext = func(ctx context.Context, network, address string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, address)
		}
	}
	return &http.Client{Transport: transport, Timeout: a.timeout}, scheme + "://" + a.target + echo.UploadPath, nil
}

func (a *uploadAgent) httpUpload(client *http.Client, url string, data []byte, declared string) (int, map[string]any, error) {
	request, _ := http.NewRequest(http.MethodPost, url, &chunkReader{data: data, chunk: a.chunk})
	request.ContentLength = int64(len(data))
	request.Header.Set(echo.ExpectedLengthKey, declared)
	request.Header.Set(echo.ExpectedSHA256Key, hexSHA(data))
	response, err := client.Do(request)
	if err != nil {
		return 0, nil, err
	}
	defer response.Body.Close()
	body := map[string]any{}
	payload, _ := io.ReadAll(response.Body)
	_ = json.NewDecoder(bytes.NewReader(payload)).Decode(&body)
	return response.StatusCode, body, nil
}

func hexSHA(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (a *uploadAgent) runHTTP2() error {
	started := time.Now()
	client, url, err := a.http2Client()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	connected := time.Now()
	for range a.warmup {
		if code, body, err := a.httpUpload(client, url, []byte{0}, "1"); err != nil || code != http.StatusOK {
			return fmt.Errorf("the warm-up upload to %s failed: HTTP %d %v %v", a.target, code, body["error"], err)
		}
	}
	emit(map[string]any{"event": "ready", "transport": "http2", "target": a.target,
		"connect_s": connected.Sub(started).Seconds(), "warmup_s": time.Since(connected).Seconds()})
	for seq := range a.repeats {
		row := newUploadRow(seq, a)
		cpuStart := echo.CPUNow()
		row["t_start_utc_ns"] = time.Now().UnixNano()
		start := time.Now()
		code, body, err := a.httpUpload(client, url, a.data, a.declaredLength())
		elapsed, cpuEnd := time.Since(start), echo.CPUNow()
		var problems []string
		var acked *int64
		ackedSHA, _ := body["sha256"].(string)
		server := map[string]any{}
		if err != nil {
			row["status"] = "connection failed"
			problems = append(problems, err.Error())
		} else {
			row["status"] = strconv.Itoa(code)
			if n, ok := body["bytes_received"].(float64); ok {
				received := int64(n)
				acked = &received
			}
			if code != http.StatusOK {
				problems = append(problems, fmt.Sprintf("HTTP %d: %v", code, body["error"]))
			}
			for _, key := range []string{"cpu_s", "cpu_user_s", "cpu_sys_s"} {
				server[key] = body["server_"+key]
			}
		}
		a.finish(row, elapsed, cpuStart, cpuEnd, acked, ackedSHA, server, problems)
		emit(row)
	}
	return nil
}
