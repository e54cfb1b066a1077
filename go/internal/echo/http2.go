package echo

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
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
)

// HTTP2 serves POST /echo and POST /upload over h2c (prior knowledge) or TLS with ALPN h2.
type HTTP2 struct {
	server    *http.Server
	listener  net.Listener
	maxUpload int64
}

// ListenHTTP2 listens on address; with a TLS config it serves TLS (ALPN h2) only.
func ListenHTTP2(address string, maxUploadBytes int64, tlsConfig *tls.Config) (*HTTP2, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	h := &HTTP2{listener: listener, maxUpload: maxUploadBytes}
	h2 := &http2.Server{MaxUploadBufferPerStream: WindowBytes, MaxUploadBufferPerConnection: WindowBytes}
	mux := http.NewServeMux()
	mux.HandleFunc(EchoPath, h.echo)
	mux.HandleFunc("/", h.upload)
	h.server = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	if tlsConfig != nil {
		config := tlsConfig.Clone()
		config.NextProtos = []string{"h2"}
		h.server.TLSConfig = config
		if err := http2.ConfigureServer(h.server, h2); err != nil {
			return nil, err
		}
		listener = tls.NewListener(listener, config)
	} else {
		h.server.Handler = h2c.NewHandler(mux, h2)
	}
	go func() { _ = h.server.Serve(listener) }()
	return h, nil
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

func reply(w http.ResponseWriter, status int, body map[string]any) {
	payload, _ := json.Marshal(body)
	w.Header().Set("content-type", "application/json")
	w.Header().Set("content-length", strconv.Itoa(len(payload)))
	w.WriteHeader(status)
	_, _ = w.Write(payload)
}

// echo counts the body and answers its length, as gRPC's Echo: no hash, no CPU reading.
func (h *HTTP2) echo(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, map[string]any{"error": EchoPath + " takes POST"})
		return
	}
	n, _ := io.Copy(io.Discard, r.Body)
	reply(w, http.StatusOK, map[string]any{"payload_length": n})
}

// upload hashes the body as it streams in, checks what the client declared, and answers with
// the bytes, the SHA-256 and the server's CPU seconds; 413 at the byte that crosses the bound.
func (h *HTTP2) upload(w http.ResponseWriter, r *http.Request) {
	start := CPUNow()
	if r.URL.Path != UploadPath {
		reply(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("no such path %q; POST %s", r.URL.Path, UploadPath)})
		return
	}
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, map[string]any{"error": UploadPath + " takes POST"})
		return
	}
	var expectedLength, expectedSHA *string
	if value := r.Header.Get(ExpectedLengthKey); value != "" {
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			reply(w, http.StatusBadRequest, map[string]any{"error": "content-length and labkit-expected-length are integers"})
			return
		}
		expectedLength = &value
	}
	if value := strings.ToLower(r.Header.Get(ExpectedSHA256Key)); value != "" {
		expectedSHA = &value
	}
	if r.ContentLength > h.maxUpload {
		h.tooLarge(w, fmt.Sprintf("content-length %d", r.ContentLength), 0)
		return
	}
	digest := sha256.New()
	received, err := io.Copy(digest, http.MaxBytesReader(w, r.Body, h.maxUpload))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		h.tooLarge(w, fmt.Sprintf("more than %d bytes", h.maxUpload), received)
		return
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

func (h *HTTP2) tooLarge(w http.ResponseWriter, what string, received int64) {
	reply(w, http.StatusRequestEntityTooLarge, map[string]any{
		"error":            fmt.Sprintf("upload too large: %s, the server's bound is %d bytes", what, h.maxUpload),
		"max_upload_bytes": h.maxUpload, "bytes_received": received,
	})
}
