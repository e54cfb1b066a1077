package hop

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
)

// ViaPrefix is the front's HTTP/1.1 path prefix: GET /via/<transport> relays over that transport.
const ViaPrefix = "/via/"

// Relay fetches the back's body over one transport, on one long-lived client.
type Relay interface {
	Fetch(ctx context.Context) ([]byte, error)
	Close()
}

// Front answers GET /via/<name> (HTTP/1.1) and BackService.Get{via: name} (gRPC) with the body
// its relay of that name fetched from the back, or 502 / UNAVAILABLE with the reason.
type Front struct {
	Relays  map[string]Relay
	Timeout time.Duration // deadline of each relayed call
	servers []func(grace time.Duration)
}

// Fetch relays one request over transport via, within the front's timeout.
func (f *Front) Fetch(ctx context.Context, via string) ([]byte, error) {
	relay, ok := f.Relays[via]
	if !ok {
		return nil, errUnknownVia
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	return relay.Fetch(ctx)
}

var errUnknownVia = errors.New("no relay over that transport")

func (f *Front) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		via, found := strings.CutPrefix(r.URL.Path, ViaPrefix)
		if _, ok := f.Relays[via]; !found || !ok {
			http.Error(w, fmt.Sprintf("no such path %q; GET %s{%s}", r.URL.Path, ViaPrefix, strings.Join(f.names(), ",")),
				http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, r.URL.Path+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		body, err := f.Fetch(r.Context(), via)
		if err != nil {
			http.Error(w, fmt.Sprintf("the back did not answer over %s: %v", via, err), http.StatusBadGateway)
			return
		}
		WriteBody(w, body)
	})
}

func (f *Front) names() []string {
	names := make([]string, 0, len(f.Relays))
	for _, name := range []string{"grpc", "http2", "http2-tls", "nats"} {
		if _, ok := f.Relays[name]; ok {
			names = append(names, name)
		}
	}
	return names
}

// ServeHTTP serves the HTTP/1.1 endpoint (the one wrk and vegeta drive); its port.
func (f *Front) ServeHTTP(address string) (int, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return 0, err
	}
	server := newHTTPServer(f.handler())
	go func() { _ = server.Serve(listener) }()
	f.servers = append(f.servers, shutdownHTTP(server))
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// ServeGRPC serves BackService.Get, relaying over the request's via (the endpoint ghz drives); its port.
func (f *Front) ServeGRPC(address string) (int, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return 0, err
	}
	server := grpc.NewServer(grpc.MaxRecvMsgSize(maxGRPCRequestBytes), grpc.MaxSendMsgSize(limits.MaxBodyBytes+1024))
	echopb.RegisterBackServiceServer(server, frontService{front: f})
	go func() { _ = server.Serve(listener) }()
	f.servers = append(f.servers, func(grace time.Duration) { echo.StopGRPC(server, grace) })
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// Close stops the endpoints (requests in flight get up to grace), then the relays' clients.
func (f *Front) Close(grace time.Duration) {
	for i := len(f.servers) - 1; i >= 0; i-- {
		f.servers[i](grace)
	}
	for _, relay := range f.Relays {
		relay.Close()
	}
}

type frontService struct {
	echopb.UnimplementedBackServiceServer
	front *Front
}

func (s frontService) Get(ctx context.Context, req *echopb.GetRequest) (*echopb.GetResponse, error) {
	body, err := s.front.Fetch(ctx, req.GetVia())
	if errors.Is(err, errUnknownVia) {
		return nil, status.Errorf(codes.NotFound, "no relay over %q; via is one of %s", req.GetVia(), strings.Join(s.front.names(), ", "))
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the back did not answer over %s: %v", req.GetVia(), err)
	}
	return &echopb.GetResponse{Body: body}, nil
}

// -- the relays ----------------------------------------------------------------------------------

// grpcRelay calls BackService.Get on a pool of channels, round robin (one channel: one connection).
type grpcRelay struct {
	conns []*grpc.ClientConn
	next  atomic.Uint64
}

// NewGRPCRelay opens channels connections to the back's gRPC target (HOST:PORT).
func NewGRPCRelay(target string, channels int) (Relay, error) {
	relay := &grpcRelay{}
	for i := 0; i < channels; i++ {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limits.MaxBodyBytes+1024)))
		if err != nil {
			relay.Close()
			return nil, err
		}
		relay.conns = append(relay.conns, conn)
	}
	return relay, nil
}

func (r *grpcRelay) Fetch(ctx context.Context) ([]byte, error) {
	conn := r.conns[r.next.Add(1)%uint64(len(r.conns))]
	reply, err := echopb.NewBackServiceClient(conn).Get(ctx, &echopb.GetRequest{})
	if err != nil {
		return nil, err
	}
	return reply.GetBody(), nil
}

func (r *grpcRelay) Close() {
	for _, conn := range r.conns {
		conn.Close()
	}
}

// http2Relay GETs the back's body over one HTTP/2 connection, multiplexing every request on it.
type http2Relay struct {
	transport *http2.Transport
	client    *http.Client
	url       string
}

// NewHTTP2Relay speaks h2c (prior knowledge) to an http:// base URL, or HTTP/2 over TLS to an
// https:// one with tlsConfig (its RootCAs the back's CA).
func NewHTTP2Relay(baseURL string, tlsConfig *tls.Config) (Relay, error) {
	// Strict: never a second connection, whatever the load; requests beyond the back's stream
	// limit wait for a stream instead, as on one multiplexed connection they must.
	transport := &http2.Transport{StrictMaxConcurrentStreams: true, ReadIdleTimeout: 30 * time.Second}
	switch {
	case strings.HasPrefix(baseURL, "http://"):
		transport.AllowHTTP = true
		transport.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	case strings.HasPrefix(baseURL, "https://") && tlsConfig != nil:
		transport.TLSClientConfig = tlsConfig
	default:
		return nil, fmt.Errorf("the back's HTTP/2 address is http://HOST:PORT, or https://HOST:PORT with a CA, not %q", baseURL)
	}
	return &http2Relay{transport: transport, client: &http.Client{Transport: transport},
		url: strings.TrimRight(baseURL, "/") + BodyPath}, nil
}

func (r *http2Relay) Fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limits.MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if len(body) > limits.MaxBodyBytes {
		return nil, fmt.Errorf("the back's body is over %d bytes", limits.MaxBodyBytes)
	}
	return body, nil
}

func (r *http2Relay) Close() { r.transport.CloseIdleConnections() }

// natsRelay sends NATS requests on one connection and waits for the back's reply.
type natsRelay struct {
	conn    *nats.Conn
	subject string
	mu      sync.Mutex
	link    context.Context // cancelled when the connection to the server drops
	drop    context.CancelFunc
}

var errNATSDisconnected = errors.New("the connection to the NATS server dropped")

// NewNATSRelay connects to the NATS server at url. While disconnected, requests fail at once (no
// reconnect buffer), and so do the requests in flight when the connection drops (their replies
// cannot come over a connection that is gone): a dead server shows as errors, not as requests
// held until they time out.
func NewNATSRelay(url, subject string) (Relay, error) {
	r := &natsRelay{subject: subject}
	r.link, r.drop = context.WithCancel(context.Background())
	conn, err := nats.Connect(url, nats.Name("labkit-go front"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { r.dropped() }))
	if err != nil {
		return nil, err
	}
	r.conn = conn
	return r, nil
}

// dropped fails the requests in flight and starts a new link for those after the reconnection.
func (r *natsRelay) dropped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop()
	r.link, r.drop = context.WithCancel(context.Background())
}

func (r *natsRelay) Fetch(ctx context.Context) ([]byte, error) {
	r.mu.Lock()
	link := r.link
	r.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(link, func() { cancel(errNATSDisconnected) })
	defer stop()
	msg, err := r.conn.RequestWithContext(ctx, r.subject, nil)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errNATSDisconnected) {
			return nil, cause
		}
		return nil, err
	}
	return msg.Data, nil
}

func (r *natsRelay) Close() { r.conn.Close() }
