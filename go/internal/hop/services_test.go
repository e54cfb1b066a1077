package hop

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func startedBack(t *testing.T, change func(*BackConfig)) *Service {
	t.Helper()
	c := BackConfig{Bind: "127.0.0.1:0", NATSWorkers: 1, Grace: "1s", Version: "test", Given: map[string]bool{}}
	if change != nil {
		change(&c)
	}
	back, err := StartBack(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Stop)
	return back
}

func frontConfig(change func(*FrontConfig)) FrontConfig {
	c := FrontConfig{Bind: "127.0.0.1:0", GRPCChannels: 1, Timeout: "5s", Grace: "1s", Version: "test"}
	change(&c)
	return c
}

// The back and the front as `labkit hop` starts them: each ready line says where it listens and what body it
// returns (the front's for every relay, after one call over each), and the front relays the back's body.
func TestTheServicesReadyLinesSayWhatTheyServe(t *testing.T) {
	body := []byte(`[{"id":1}]`)
	path := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	back := startedBack(t, func(c *BackConfig) { c.BodyFile = path })
	ready := back.Ready
	if ready["role"] != "back" || ready["body_bytes"] != len(body) || ready["body_sha256"] != sha256Hex(body) ||
		ready["labkit_version"] != "test" || ready["nats_go_version"] == nil || ready["http_port"].(int) == 0 {
		t.Fatalf("back ready line %v", ready)
	}
	front, err := StartFront(frontConfig(func(c *FrontConfig) {
		c.BackGRPC = fmt.Sprintf("127.0.0.1:%d", ready["grpc_port"])
		c.BackHTTP2, c.GRPCChannels = fmt.Sprintf("http://127.0.0.1:%d", ready["http_port"]), 2
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer front.Stop()
	fready := front.Ready
	sums := fready["body_sha256"].(map[string]string)
	if fready["role"] != "front" || !slices.Equal(fready["via"].([]string), []string{"grpc", "http2"}) ||
		sums["grpc"] != sha256Hex(body) || sums["http2"] != sha256Hex(body) || fready["grpc_channels"] != 2 {
		t.Fatalf("front ready line %v", fready)
	}
	if code, got, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/via/grpc", fready["http_port"])); code != 200 || !bytes.Equal(got, body) {
		t.Fatalf("the front relayed %d, %q", code, got)
	}
}

// The front does not say it is ready when a relay cannot reach the back: its first call fails, in one line.
func TestTheFrontRefusesABackItCannotReach(t *testing.T) {
	_, err := StartFront(frontConfig(func(c *FrontConfig) { c.BackHTTP2 = "http://127.0.0.1:1" }))
	if err == nil || !strings.HasPrefix(err.Error(), "the first call over http2 failed: ") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v", err)
	}
}

// What `labkit hop` refuses of each service, in one line, before anything listens.
func TestTheServicesRefuseTheirBounds(t *testing.T) {
	for _, tc := range []struct {
		change func(*BackConfig)
		says   string
	}{
		{func(c *BackConfig) { c.Bind = "" }, "--bind HOST:PORT is required"},
		{func(c *BackConfig) { c.TLSKey = "key.pem" }, "--tls-cert and --tls-key go together"},
		{func(c *BackConfig) { c.TLSPort = -2 }, "--tls-port -2 is out of range [0, 65535]"},
		{func(c *BackConfig) { c.NATSWorkers = 1025 }, "--nats-workers must be between 1 and 1024, not 1025"},
		{func(c *BackConfig) { c.Given["nats-subject"] = true }, "--nats-subject needs --nats-url"},
		{func(c *BackConfig) { c.Grace = "1000h" }, `--grace: "1000h" is longer than 168h`},
		{func(c *BackConfig) { c.BodyFile = "/dev/zero" }, "--body-file /dev/zero is not a regular file"},
	} {
		c := BackConfig{Bind: "127.0.0.1:0", NATSWorkers: 1, Grace: "1s", Given: map[string]bool{}}
		tc.change(&c)
		if back, err := StartBack(c); err == nil || !strings.Contains(err.Error(), tc.says) {
			if back != nil {
				back.Stop()
			}
			t.Errorf("back %+v: %v, want %q", c, err, tc.says)
		}
	}
	for _, tc := range []struct {
		change func(*FrontConfig)
		says   string
	}{
		{func(c *FrontConfig) {}, "give at least one of --back-grpc, --back-http2, --back-http2-tls, --nats-url"},
		{func(c *FrontConfig) { c.GRPCPort = 70000 }, "--grpc-port 70000 is out of range [0, 65535]"},
		{func(c *FrontConfig) { c.GRPCChannels = 257 }, "--grpc-channels must be between 1 and 256, not 257"},
		{func(c *FrontConfig) { c.BackHTTP2TLS = "https://127.0.0.1:1" }, "--back-http2-tls and --back-ca go together"},
		{func(c *FrontConfig) { c.Timeout = "0s" }, `--timeout must be a positive duration of at most 168h, not "0s"`},
		{func(c *FrontConfig) { c.Grace = "1000h" }, `--grace: "1000h" is longer than 168h`},
		{func(c *FrontConfig) { c.BackGRPC = "back" }, `--back-grpc: "back" is not HOST:PORT`},
		{func(c *FrontConfig) { c.BackHTTP2TLS, c.BackCA = "https://127.0.0.1:1", "/dev/null" }, "--back-ca /dev/null is not a regular file"},
	} {
		c := frontConfig(tc.change)
		if front, err := StartFront(c); err == nil || !strings.Contains(err.Error(), tc.says) {
			if front != nil {
				front.Stop()
			}
			t.Errorf("front %+v: %v, want %q", c, err, tc.says)
		}
	}
}
