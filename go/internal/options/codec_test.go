package options_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/echo/echotest"
	"labkit/go/internal/options"
)

// counting passes every call to the codec of codec=vtproto and counts, by message type, what it marshals: the
// server marshals responses, the client requests, so the counts say which end took the codec.
type counting struct {
	encoding.CodecV2
	mu         sync.Mutex
	marshalled map[string]int
}

func (c *counting) Marshal(v any) (mem.BufferSlice, error) {
	c.mu.Lock()
	c.marshalled[fmt.Sprintf("%T", v)]++
	c.mu.Unlock()
	return c.CodecV2.Marshal(v)
}

func (c *counting) count(message any) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.marshalled[fmt.Sprintf("%T", message)]
}

// payloadSizeCases are the request sizes of the codec tests: empty, one byte, a small and a pooled buffer.
var payloadSizeCases = []int{0, 1, 64, 128 << 10}

// echoEverySize calls Echo and Upload over conn with each payload size, and checks that the server saw every
// byte: Echo's length, and Upload's count and SHA-256 of the chunks it received.
func echoEverySize(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	client := echopb.NewEchoServiceClient(conn)
	ctx := context.Background()
	upload, err := client.Upload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	digest, sent := sha256.New(), 0
	for _, size := range payloadSizeCases {
		payload := make([]byte, size)
		rand.Read(payload)
		reply, err := client.Echo(ctx, &echopb.EchoRequest{Payload: payload})
		if err != nil || reply.GetPayloadLength() != int64(size) {
			t.Fatalf("Echo of %d bytes: %v, %v", size, reply, err)
		}
		if err := upload.Send(&echopb.Chunk{Content: payload}); err != nil {
			t.Fatal(err)
		}
		digest.Write(payload)
		sent += size
	}
	status, err := upload.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if status.GetCode() != echopb.UploadStatusCode_OK || status.GetBytesReceived() != int64(sent) ||
		status.GetSha256() != hex.EncodeToString(digest.Sum(nil)) || !strings.HasPrefix(status.GetMessage(), "received") {
		t.Fatalf("upload of %d bytes came back as %v", sent, status)
	}
}

// A server and a client given codec=vtproto take the vtproto codec (and only they do), and each talks to a
// standard grpc-go end, payloads intact: the codec's name keeps the wire as it was.
func TestCodecVTProtoEndsTalkToStandardOnes(t *testing.T) {
	for _, c := range []struct {
		server, client string // the codec option of each end; "" gives none
	}{{"vtproto", ""}, {"vtproto", "vtproto"}, {"", "vtproto"}, {"proto", "proto"}} {
		t.Run(fmt.Sprintf("server=%s,client=%s", c.server, c.client), func(t *testing.T) {
			codecs := &counting{CodecV2: options.VTProtoCodec(), marshalled: map[string]int{}}
			defer options.SetVTProtoCodec(codecs)()
			server := echotest.Start(t, func(config *echo.ServerConfig) {
				if c.server != "" {
					config.GRPCOptions = []string{"codec=" + c.server}
				}
			})
			var items []string
			if c.client != "" {
				items = []string{"codec=" + c.client}
			}
			values, err := options.Parse(items, "client")
			if err != nil {
				t.Fatal(err)
			}
			dial, err := values.DialOptions()
			if err != nil {
				t.Fatal(err)
			}
			conn, err := grpc.NewClient(server.Target, append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			echoEverySize(t, conn)
			// Each Echo marshals one request and one response, the upload a chunk per size and one status.
			calls, byServer, byClient := len(payloadSizeCases), 0, 0
			if c.server == "vtproto" {
				byServer = 1
			}
			if c.client == "vtproto" {
				byClient = 1
			}
			for _, want := range []struct {
				message any
				count   int
			}{{&echopb.EchoResponse{}, byServer * calls}, {&echopb.UploadStatus{}, byServer},
				{&echopb.EchoRequest{}, byClient * calls}, {&echopb.Chunk{}, byClient * calls}} {
				if got := codecs.count(want.message); got != want.count {
					t.Errorf("the vtproto codec marshalled %d %T, not %d", got, want.message, want.count)
				}
			}
		})
	}
}

// The option's value is a string in the ready line, and a value other than proto or vtproto is refused.
func TestCodecValues(t *testing.T) {
	for _, side := range []string{"client", "server"} {
		values, err := options.Parse([]string{"codec=vtproto"}, side)
		if err != nil || values["codec"] != "vtproto" || values.Text() != "codec=vtproto" {
			t.Errorf("%s: codec=vtproto parsed as %v (%v)", side, values, err)
		}
		if _, err := options.Parse([]string{"codec=json"}, side); err == nil ||
			err.Error() != `--grpc-option codec: "json" is not proto or vtproto` {
			t.Errorf("%s: codec=json: %v", side, err)
		}
	}
}

// codec=vtproto adds one option on each side, codec=proto none: grpc-go's own codec is its default.
func TestCodecProtoAddsNoOption(t *testing.T) {
	count := func(item string) (server, dial int) {
		values, err := options.Parse([]string{item}, "server")
		if err != nil {
			t.Fatal(err)
		}
		s, err := values.ServerOptions(4 << 20)
		if err != nil {
			t.Fatal(err)
		}
		d, err := values.DialOptions()
		if err != nil {
			t.Fatal(err)
		}
		return len(s), len(d)
	}
	baseServer, baseDial := count("compression=none")
	if s, d := count("codec=proto"); s != baseServer || d != baseDial {
		t.Errorf("codec=proto added options: %d server, %d dial (%d, %d without)", s, d, baseServer, baseDial)
	}
	if s, d := count("codec=vtproto"); s != baseServer+1 || d != baseDial+1 {
		t.Errorf("codec=vtproto made %d server and %d dial options (%d, %d without)", s, d, baseServer, baseDial)
	}
}
