package hop

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/limits"
)

// The default body and Go's HTTP/1.1 headers make the 366 bytes per response of the published runs.
func TestDefaultBodyIsAJSONListOf257Bytes(t *testing.T) {
	body := DefaultBody()
	if len(body) != 257 || body[0] != '[' || body[len(body)-1] != ']' {
		t.Fatalf("default body is %d bytes: %s", len(body), body)
	}
	if _, err := NewBack(make([]byte, limits.MaxBodyBytes+1)); err == nil {
		t.Fatal("a body over the bound was accepted")
	}
}

func startBack(t *testing.T, body []byte) (back *Back, httpPort, grpcPort int) {
	t.Helper()
	back, err := NewBack(body)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close(time.Second) })
	if httpPort, err = back.ServeHTTP("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if grpcPort, err = back.ServeGRPC("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return back, httpPort, grpcPort
}

func get(t *testing.T, url string) (int, []byte, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Proto
}

func TestEveryRelayReturnsTheBacksExactBody(t *testing.T) {
	body := []byte(`[{"id":1,"name":"\u00e9","bytes":"` + string(bytes.Repeat([]byte("x"), 70000)) + `"}]`)
	_, httpPort, grpcPort := startBack(t, body)
	grpcRelay, err := NewGRPCRelay(fmt.Sprintf("127.0.0.1:%d", grpcPort), 2)
	if err != nil {
		t.Fatal(err)
	}
	h2Relay, err := NewHTTP2Relay(fmt.Sprintf("http://127.0.0.1:%d", httpPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	front := &Front{Relays: map[string]Relay{"grpc": grpcRelay, "http2": h2Relay}, Timeout: 5 * time.Second}
	t.Cleanup(func() { front.Close(time.Second) })
	port, err := front.ServeHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, via := range []string{"grpc", "http2"} {
		for i := 0; i < 3; i++ { // the pool's channels in turn
			code, got, proto := get(t, fmt.Sprintf("http://127.0.0.1:%d/via/%s", port, via))
			if code != 200 || !bytes.Equal(got, body) || proto != "HTTP/1.1" {
				t.Fatalf("via %s: %d %s, %d bytes, want the back's %d", via, code, proto, len(got), len(body))
			}
		}
	}
	// The back answers HTTP/1.1 itself too (the direct cells), and nothing but GET /products.
	if code, got, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/products", httpPort)); code != 200 || !bytes.Equal(got, body) {
		t.Fatalf("direct: %d, %d bytes", code, len(got))
	}
	if code, _, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/other", httpPort)); code != 404 {
		t.Fatalf("another path answered %d", code)
	}
	if code, _, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/via/nats", port)); code != 404 {
		t.Fatalf("a transport the front has no relay for answered %d", code)
	}
}

func TestTheFrontsGRPCEndpointRelaysByVia(t *testing.T) {
	body := DefaultBody()
	_, httpPort, _ := startBack(t, body)
	relay, _ := NewHTTP2Relay(fmt.Sprintf("http://127.0.0.1:%d", httpPort), nil)
	front := &Front{Relays: map[string]Relay{"http2": relay}, Timeout: 5 * time.Second}
	t.Cleanup(func() { front.Close(time.Second) })
	port, err := front.ServeGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := echopb.NewBackServiceClient(conn)
	reply, err := client.Get(context.Background(), &echopb.GetRequest{Via: "http2"})
	if err != nil || !bytes.Equal(reply.GetBody(), body) {
		t.Fatalf("via http2: %v, %d bytes", err, len(reply.GetBody()))
	}
	if _, err := client.Get(context.Background(), &echopb.GetRequest{Via: "nats"}); status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown via gave %v", err)
	}
}

// A back that is gone is a 502 with the reason, as soon as the relay knows, not a hang.
func TestADeadBackIsABadGatewayWithinTheTimeout(t *testing.T) {
	back, httpPort, grpcPort := startBack(t, DefaultBody())
	grpcRelay, _ := NewGRPCRelay(fmt.Sprintf("127.0.0.1:%d", grpcPort), 1)
	h2Relay, _ := NewHTTP2Relay(fmt.Sprintf("http://127.0.0.1:%d", httpPort), nil)
	front := &Front{Relays: map[string]Relay{"grpc": grpcRelay, "http2": h2Relay}, Timeout: 2 * time.Second}
	t.Cleanup(func() { front.Close(time.Second) })
	port, _ := front.ServeHTTP("127.0.0.1:0")
	back.Close(0)
	for _, via := range []string{"grpc", "http2"} {
		started := time.Now()
		code, text, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/via/%s", port, via))
		if code != http.StatusBadGateway || !bytes.Contains(text, []byte("the back did not answer over "+via)) {
			t.Fatalf("via %s after the back stopped: %d %s", via, code, text)
		}
		if elapsed := time.Since(started); elapsed > 3*time.Second {
			t.Fatalf("via %s: the 502 took %v, beyond the 2 s timeout", via, elapsed)
		}
	}
}

func TestHTTP2OverTLSNeedsTheBacksCA(t *testing.T) {
	certPEM, config := selfSigned(t)
	back, err := NewBack(DefaultBody())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close(time.Second) })
	port, err := back.ServeTLS("127.0.0.1:0", config)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	relay, err := NewHTTP2Relay(fmt.Sprintf("https://127.0.0.1:%d", port), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	got, err := relay.Fetch(context.Background())
	if err != nil || !bytes.Equal(got, DefaultBody()) {
		t.Fatalf("over TLS: %v, %q", err, got)
	}
	stranger, _ := NewHTTP2Relay(fmt.Sprintf("https://127.0.0.1:%d", port), &tls.Config{RootCAs: x509.NewCertPool()})
	if _, err := stranger.Fetch(context.Background()); err == nil {
		t.Fatal("a client without the back's CA was answered")
	}
	if _, err := NewHTTP2Relay("ftp://127.0.0.1:1", nil); err == nil {
		t.Fatal("an ftp:// address was accepted")
	}
}

// selfSigned is a certificate for 127.0.0.1 and the server config that presents it.
func selfSigned(t *testing.T) ([]byte, *tls.Config) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hop test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	certPEM := pemBlock("CERTIFICATE", der)
	return certPEM, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
