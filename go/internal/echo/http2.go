package echo

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// Paths of the HTTP/2 endpoint, as labkit/echo/http2.py serves them.
const (
	UploadPath = "/upload"
	EchoPath   = "/echo"
	// WindowBytes is the flow-control window the endpoint grants, as Python's DEFAULT_WINDOW_BYTES:
	// on the paths labkit measures the window never limits a POST.
	WindowBytes = 16 << 20
	// maxFrameBytes is the largest DATA frame accepted: HTTP/2's default and gRPC's, so that both
	// transports cut a chunk into the same frames (x/net would otherwise announce 1 MiB).
	maxFrameBytes = 16384
	// MaxHTTP2Connections and HTTP2IdleTimeout bound idle connections as the Python endpoint does
	// (DEFAULT_MAX_CONNECTIONS, DEFAULT_IDLE_S): at most this many at once, a connection beyond them
	// closed as it is accepted, and one without a stream for this long closed (300 idle ones were
	// all kept before).
	MaxHTTP2Connections = 128
	HTTP2IdleTimeout    = 60 * time.Second
)

// http1Refusal is the Python endpoint's words to an HTTP/1.x client.
const http1Refusal = "this endpoint speaks HTTP/2 only (h2c with prior knowledge, or TLS with ALPN h2)\n"

// HTTP2 serves POST /echo and POST /upload over h2c (prior knowledge) or TLS with ALPN h2.
type HTTP2 struct {
	server    *http.Server
	listener  net.Listener
	maxUpload int64
}

// ListenHTTP2 listens on address; with a TLS config it serves TLS (ALPN h2) only.
func ListenHTTP2(address string, maxUploadBytes int64, tlsConfig *tls.Config) (*HTTP2, error) {
	return listenHTTP2(address, maxUploadBytes, tlsConfig, MaxHTTP2Connections, HTTP2IdleTimeout)
}

// listenHTTP2 is ListenHTTP2 with its bounds on connections given (tests use small ones).
func listenHTTP2(address string, maxUploadBytes int64, tlsConfig *tls.Config, maxConnections int, idle time.Duration) (*HTTP2, error) {
	tcp, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	var listener net.Listener = &boundedListener{Listener: tcp, slots: make(chan struct{}, maxConnections)}
	h := &HTTP2{listener: tcp, maxUpload: maxUploadBytes}
	// The settings of the Python endpoint: its windows, frame size, streams and header list bound.
	h2 := &http2.Server{MaxUploadBufferPerStream: WindowBytes, MaxUploadBufferPerConnection: WindowBytes,
		MaxReadFrameSize: maxFrameBytes, MaxConcurrentStreams: 100, IdleTimeout: idle}
	h.server = &http.Server{Handler: http.HandlerFunc(h.route), ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 65536,
		IdleTimeout: idle}
	if tlsConfig != nil {
		h.server.TLSConfig = tlsConfig.Clone()
		if err := http2.ConfigureServer(h.server, h2); err != nil {
			listener.Close()
			return nil, err
		}
		h.server.TLSConfig.NextProtos = []string{"h2"} // ConfigureServer adds http/1.1; a client without h2 has nothing to say here
		listener = tls.NewListener(listener, h.server.TLSConfig)
	} else {
		// Prior knowledge arrives as HTTP/2; whatever arrives as HTTP/1.x (an h2c upgrade included) gets 505.
		h.server.Handler = refuseHTTP1(h2c.NewHandler(h.server.Handler, h2))
	}
	go func() { _ = h.server.Serve(listener) }()
	return h, nil
}

// boundedListener accepts at most cap(slots) connections at once; one beyond them is closed as it
// is accepted (the client reads end of file), as the Python endpoint closes it, and the ones being
// served go on. A connection gives its slot back when it is closed.
type boundedListener struct {
	net.Listener
	slots chan struct{}
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: conn, release: func() { <-l.slots }}, nil
		default:
			conn.Close()
		}
	}
}

// slotConn is a connection that holds one of a boundedListener's slots until it is closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// refuseHTTP1 answers HTTP/1.x requests with 505 before h2c could upgrade them: the Python endpoint
// speaks HTTP/2 from the first byte only, and so must its twin.
func refuseHTTP1(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 {
			refuse(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse is what an HTTP/1.x client gets, as from the Python endpoint: a reason it can read.
func refuse(w http.ResponseWriter) {
	w.Header().Set("content-type", "text/plain")
	w.Header().Set("connection", "close")
	w.WriteHeader(http.StatusHTTPVersionNotSupported)
	_, _ = io.WriteString(w, http1Refusal)
}

// Port is the port it listens on.
func (h *HTTP2) Port() int { return h.listener.Addr().(*net.TCPAddr).Port }

// Close stops the endpoint, giving streams in flight up to grace to finish.
func (h *HTTP2) Close(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if h.server.Shutdown(ctx) != nil {
		h.server.Close()
	}
}

// route sends POST /echo to echo and everything else to upload, which refuses other paths and
// methods: the same answers as the Python endpoint, whose only other route is /upload.
func (h *HTTP2) route(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 2 { // TLS without ALPN h2
		refuse(w)
		return
	}
	if r.URL.Path == EchoPath && r.Method == http.MethodPost {
		h.echo(w, r)
		return
	}
	h.upload(w, r)
}

func reply(w http.ResponseWriter, status int, body map[string]any) {
	payload, _ := json.Marshal(body)
	w.Header().Set("content-type", "application/json")
	w.Header().Set("content-length", strconv.Itoa(len(payload)))
	w.WriteHeader(status)
	_, _ = w.Write(payload)
}

// echo counts the body and answers its length, as gRPC's Echo: no hash, no CPU reading.
func (h *HTTP2) echo(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	reply(w, http.StatusOK, map[string]any{"payload_length": n})
}

// upload hashes the body as it streams in, checks what the client declared, and answers with
// the bytes, the SHA-256 and the server's CPU seconds; 413 at the read that crosses the bound.
func (h *HTTP2) upload(w http.ResponseWriter, r *http.Request) {
	start := CPUNow()
	if r.URL.Path != UploadPath {
		reply(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("no such path '%s'; POST %s", r.URL.Path, UploadPath)})
		return
	}
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, map[string]any{"error": UploadPath + " takes POST"})
		return
	}
	expectedLength, expectedSHA, ok := declared(r.Header)
	if !ok {
		reply(w, http.StatusBadRequest, map[string]any{"error": "content-length and labkit-expected-length are integers"})
		return
	}
	if r.ContentLength > h.maxUpload {
		h.tooLarge(w, fmt.Sprintf("content-length %d", r.ContentLength), 0)
		return
	}
	digest := sha256.New()
	received, err := h.hashBody(r.Body, digest)
	if err != nil {
		if received > h.maxUpload {
			h.tooLarge(w, fmt.Sprintf("more than %d bytes", h.maxUpload), received)
		}
		return // otherwise the client went away: nobody to answer
	}
	sum := hex.EncodeToString(digest.Sum(nil))
	body := map[string]any{"bytes_received": received, "sha256": sum}
	problems := Mismatches(expectedLength, expectedSHA, received, sum)
	status := http.StatusOK
	if len(problems) > 0 {
		body["error"], status = strings.Join(problems, "; "), http.StatusUnprocessableEntity
	}
	for key, value := range CPUNow().Since(start) { // measured last: the CPU covers the upload up to its answer
		body["server_"+key] = value
	}
	reply(w, status, body)
}

// declared reads the labkit-expected-* headers; the length as the integer Python's int() makes of it.
func declared(header http.Header) (length, sha *string, ok bool) {
	if value := strings.TrimSpace(header.Get(ExpectedLengthKey)); value != "" {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, nil, false
		}
		normal := strconv.FormatInt(n, 10)
		length = &normal
	}
	if value := strings.ToLower(header.Get(ExpectedSHA256Key)); value != "" {
		sha = &value
	}
	return length, sha, true
}

// hashBody counts and hashes the body as it arrives, never holding more than one read; it stops
// with an error as soon as the count passes the bound (the count then says by how much).
func (h *HTTP2) hashBody(body io.Reader, digest hash.Hash) (int64, error) {
	buffer := make([]byte, 64<<10)
	var received int64
	for {
		n, err := body.Read(buffer)
		received += int64(n)
		if received > h.maxUpload {
			return received, errTooLarge
		}
		digest.Write(buffer[:n])
		if err == io.EOF {
			return received, nil
		}
		if err != nil {
			return received, err
		}
	}
}

var errTooLarge = errors.New("upload too large")

func (h *HTTP2) tooLarge(w http.ResponseWriter, what string, received int64) {
	reply(w, http.StatusRequestEntityTooLarge, map[string]any{
		"error":            fmt.Sprintf("upload too large: %s, the server's bound is %d bytes", what, h.maxUpload),
		"max_upload_bytes": h.maxUpload, "bytes_received": received,
	})
}
