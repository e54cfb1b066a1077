package echo_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/echo/echotest"
	"labkit/go/internal/limits"
)

// The server answers Echo, health and the raw TCP echo where its ready line says, and says what it is.
func TestTheServerAnswersWhereItsReadyLineSays(t *testing.T) {
	server := echotest.Start(t, func(c *echo.ServerConfig) { c.Version, c.Reflection = "test", true })
	ready := server.Ready
	if ready["event"] != "ready" || ready["impl"] != "go" || ready["labkit_version"] != "test" || ready["tls"] != false ||
		ready["reflection"] != true || ready["max_message_bytes"] != int64(echo.DefaultMaxMessageBytes) ||
		ready["http2_window_bytes"] != echo.WindowBytes || ready["max_upload_bytes"] != int64(echo.DefaultMaxUploadBytes) {
		t.Fatalf("ready line %v", ready)
	}
	conn, err := grpc.NewClient(server.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply, err := echopb.NewEchoServiceClient(conn).Echo(context.Background(), &echopb.EchoRequest{Payload: make([]byte, 1234)})
	if err != nil || reply.GetPayloadLength() != 1234 {
		t.Fatalf("Echo of 1234 bytes: %v, %v", reply, err)
	}
	health, err := healthpb.NewHealthClient(conn).Check(context.Background(),
		&healthpb.HealthCheckRequest{Service: echopb.EchoService_ServiceDesc.ServiceName})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", health, err)
	}
	tcp, err := net.Dial("tcp", server.TCPEchoTarget)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	request := binary.BigEndian.AppendUint32(nil, 3)
	if _, err := tcp.Write(append(request, 'a', 'b', 'c')); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, 4)
	if _, err := io.ReadFull(tcp, answer); err != nil || binary.BigEndian.Uint32(answer) != 3 {
		t.Fatalf("TCP echo answered %v (%v)", answer, err)
	}
	server.Stop()
	if _, err := net.Dial("tcp", server.Target); err == nil {
		t.Fatal("the server still accepts connections after Stop")
	}
}

// Every bound and pairing of the flags is refused in one line before anything listens, as the Python server's.
func TestTheServerRefusesWhatItsPythonTwinRefuses(t *testing.T) {
	for _, tc := range []struct {
		change func(*echo.ServerConfig)
		says   string
	}{
		{func(c *echo.ServerConfig) { c.Bind = "" }, "--bind HOST:PORT is required"},
		{func(c *echo.ServerConfig) { c.Bind = "::1:5" }, "write IPv6 addresses in brackets"},
		{func(c *echo.ServerConfig) { c.TLSCert = "cert.pem" }, "--tls-cert and --tls-key go together"},
		{func(c *echo.ServerConfig) { c.MaxMessageBytes = limits.MaxMessageBytes + 1 }, "max message size must be between 1 byte and 2147483647"},
		{func(c *echo.ServerConfig) { c.TCPEchoPort = 65536 }, "--tcp-echo-port 65536 is out of range [0, 65535]"},
		{func(c *echo.ServerConfig) { c.PermitKeepaliveMs, c.Given["permit-keepalive-ms"] = 0, true }, "--permit-keepalive-ms must be between 1 and 3600000"},
		{func(c *echo.ServerConfig) {
			c.PermitKeepaliveMs, c.Given["permit-keepalive-ms"] = limits.MaxKeepaliveMs+1, true
		}, "--permit-keepalive-ms"},
		{func(c *echo.ServerConfig) { c.MaxUploadBytes = limits.MaxFileBytes + 1 }, "--max-upload-bytes must be between 0 and 1073741824"},
		{func(c *echo.ServerConfig) { c.Given = map[string]bool{"max-upload-bytes": true} }, "give --http2-port too"},
		{func(c *echo.ServerConfig) { c.Grace = "169h" }, `--grace: "169h" is longer than 168h`},
		{func(c *echo.ServerConfig) { c.GRPCOptions = []string{"pool=2"} }, "--grpc-option pool is a client option, not a server one"},
		{func(c *echo.ServerConfig) { c.TLSCert, c.TLSKey = "/dev/zero", "/dev/zero" }, "--tls-cert /dev/zero is not a regular file"},
	} {
		c := echo.ServerConfig{Bind: "127.0.0.1:0", Grace: "1s", MaxMessageBytes: echo.DefaultMaxMessageBytes, Given: map[string]bool{}}
		tc.change(&c)
		server, err := echo.StartServer(c)
		if err == nil {
			server.Stop()
			t.Fatalf("%+v was accepted", c)
		}
		if !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %q, want one line with %q", c, err, tc.says)
		}
	}
}

// A port already taken is named with the operating system's reason alone.
func TestAPortInUseIsNamedWithItsReason(t *testing.T) {
	taken := echotest.Start(t)
	_, err := echo.StartServer(echo.ServerConfig{Bind: "127.0.0.1:0", Grace: "1s", MaxMessageBytes: 1,
		TCPEchoPort: taken.TCPEchoPort, Given: map[string]bool{"tcp-echo-port": true}})
	if err == nil || !strings.HasSuffix(err.Error(), "port "+strings.TrimPrefix(taken.TCPEchoTarget, "127.0.0.1:")+": bind: address already in use") {
		t.Fatalf("%v", err)
	}
}

// /proc/<pid>/io as a shell's was (testdata): syscr 8 + syscw 3; a text without both lines is unknown.
func TestReadAndWriteSystemCallsComeFromProcIO(t *testing.T) {
	text, err := os.ReadFile("testdata/proc-self-io.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := echo.ParseRWSyscalls(string(text)); got != 11 {
		t.Fatalf("syscr + syscw = %d, want 11", got)
	}
	if got := echo.ParseRWSyscalls("rchar: 3980\nsyscr: 8\n"); got != -1 {
		t.Fatalf("without syscw: %d, want -1", got)
	}
	if now := echo.CPUNow(); now.RWSyscalls < 1 {
		t.Fatalf("this process has read its own /proc/self/io, yet counts %d calls", now.RWSyscalls)
	}
}
