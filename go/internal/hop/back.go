// Package hop is the two services of `labkit hop` (research brief, experiment 4): a back service
// that answers every request with one configured body, and a front relay that answers each of its
// own requests by calling the back over gRPC, HTTP/2 or NATS request-reply and returning the
// back's body. Comparing the front's latency with the back's own is the cost of one hop.
package hop

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"google.golang.org/grpc"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
)

const (
	// BodyPath is where the back answers its body over HTTP/1.1 and HTTP/2 (GET).
	BodyPath = "/products"
	// maxHeaderBytes bounds a request's header block on every HTTP endpoint.
	maxHeaderBytes = 64 << 10
	// maxGRPCRequestBytes bounds a GetRequest (a transport name): anything larger is not a client of ours.
	maxGRPCRequestBytes = 64 << 10
	// DefaultSubject is the NATS subject the back answers on unless told otherwise.
	DefaultSubject = "labkit.hop.back"
)

// product is one item of the default body: the published back API answered a product list.
type product struct {
	ID    int     `json:"id"`
	Name  string  `json:"name"`
	Price float64 `json:"price"`
	Stock int     `json:"stock"`
}

// DefaultBody is a JSON list of three products, 257 bytes: with the 109 bytes of header Go's
// net/http sends with it over HTTP/1.1, each response is the 366 bytes the published wrk runs
// read per request (15.50 MiB in 44421 requests, 26.67 MiB in 76397: wrk counts in MiB).
func DefaultBody() []byte {
	items := []product{
		{1, "Espresso machine, 15 bar pump", 249.90, 12},
		{2, "Burr coffee grinder, 40 settings, 250 g hopper", 129.00, 31},
		{3, "Milk frothing pitcher, 600 ml, engraved measurements", 24.50, 87},
	}
	body, _ := json.Marshal(items)
	return body
}

// Back answers Body on every transport it was asked to serve.
type Back struct {
	Body    []byte
	servers []func(grace time.Duration)
}

// NewBack checks the body against limits.MaxBodyBytes.
func NewBack(body []byte) (*Back, error) {
	if len(body) > limits.MaxBodyBytes {
		return nil, fmt.Errorf("the body is %d bytes; the bound is %d (one NATS message)", len(body), limits.MaxBodyBytes)
	}
	return &Back{Body: body}, nil
}

// handler answers GET BodyPath with the body, over HTTP/1.1 and HTTP/2 alike.
func (b *Back) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != BodyPath {
			http.Error(w, fmt.Sprintf("no such path %q; GET %s", r.URL.Path, BodyPath), http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, BodyPath+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		WriteBody(w, b.Body)
	})
}

// WriteBody answers 200 with a JSON body of known length (the headers the 366-byte figure counts).
func WriteBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// ServeHTTP serves HTTP/1.1 and h2c (prior knowledge) on one listener; its port.
func (b *Back) ServeHTTP(address string) (int, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return 0, err
	}
	server := newHTTPServer(h2c.NewHandler(b.handler(), &http2.Server{}))
	go func() { _ = server.Serve(listener) }()
	b.servers = append(b.servers, shutdownHTTP(server))
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// ServeTLS serves HTTP/2 (ALPN h2) and HTTP/1.1 over TLS; its port.
func (b *Back) ServeTLS(address string, config *tls.Config) (int, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return 0, err
	}
	server := newHTTPServer(b.handler())
	server.TLSConfig = config.Clone()
	if err := http2.ConfigureServer(server, &http2.Server{}); err != nil {
		listener.Close()
		return 0, err
	}
	go func() { _ = server.Serve(tls.NewListener(listener, server.TLSConfig)) }()
	b.servers = append(b.servers, shutdownHTTP(server))
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// ServeGRPC serves BackService.Get; its port.
func (b *Back) ServeGRPC(address string) (int, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return 0, err
	}
	server := grpc.NewServer(grpc.MaxRecvMsgSize(maxGRPCRequestBytes), grpc.MaxSendMsgSize(limits.MaxBodyBytes+1024))
	echopb.RegisterBackServiceServer(server, backService{body: b.Body})
	go func() { _ = server.Serve(listener) }()
	b.servers = append(b.servers, func(grace time.Duration) { echo.StopGRPC(server, grace) })
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// ServeNATS answers requests on subject from workers subscriptions of one queue group (each
// subscription delivers its messages one at a time, so workers is how many are answered at once).
func (b *Back) ServeNATS(url, subject string, workers int) error {
	conn, err := nats.Connect(url, nats.Name("labkit-go back"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return err
	}
	for i := 0; i < workers; i++ {
		if _, err := conn.QueueSubscribe(subject, "labkit-hop-back", func(m *nats.Msg) { _ = m.Respond(b.Body) }); err != nil {
			conn.Close()
			return err
		}
	}
	if err := conn.Flush(); err != nil { // the subscriptions are on the server before the ready line
		conn.Close()
		return err
	}
	b.servers = append(b.servers, func(time.Duration) { _ = conn.Drain() })
	return nil
}

// Close stops every endpoint, giving requests in flight up to grace.
func (b *Back) Close(grace time.Duration) {
	for i := len(b.servers) - 1; i >= 0; i-- {
		b.servers[i](grace)
	}
}

type backService struct {
	echopb.UnimplementedBackServiceServer
	body []byte
}

func (s backService) Get(context.Context, *echopb.GetRequest) (*echopb.GetResponse, error) {
	return &echopb.GetResponse{Body: s.body}, nil
}

func newHTTPServer(handler http.Handler) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: maxHeaderBytes}
}

func shutdownHTTP(server *http.Server) func(time.Duration) {
	return func(grace time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if server.Shutdown(ctx) != nil {
			server.Close()
		}
	}
}
