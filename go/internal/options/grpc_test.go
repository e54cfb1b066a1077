package options_test

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/echo/echotest"
)

// payloadSizes records the wire and plain sizes of every message a client receives.
type payloadSizes struct {
	mu           sync.Mutex
	compressed   []int
	uncompressed []int
}

func (p *payloadSizes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (p *payloadSizes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (p *payloadSizes) HandleConn(context.Context, stats.ConnStats)                       {}
func (p *payloadSizes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		p.mu.Lock()
		p.compressed, p.uncompressed = append(p.compressed, in.CompressedLength), append(p.uncompressed, in.Length)
		p.mu.Unlock()
	}
}

// The server's compression=gzip compresses its answers, as grpcio's default compression algorithm does.
func TestServerCompressionGzipCompressesResponses(t *testing.T) {
	for _, compression := range []string{"gzip", "none"} {
		server := echotest.Start(t, func(c *echo.ServerConfig) { c.GRPCOptions = []string{"compression=" + compression} })
		sizes := &payloadSizes{}
		conn, err := grpc.NewClient(server.Target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStatsHandler(sizes))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := echopb.NewEchoServiceClient(conn).Echo(context.Background(), &echopb.EchoRequest{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		server.Stop()
		compressed := sizes.compressed[0] != sizes.uncompressed[0]
		if compressed != (compression == "gzip") {
			t.Errorf("compression=%s: response of %d bytes came as %d", compression, sizes.uncompressed[0], sizes.compressed[0])
		}
	}
}
