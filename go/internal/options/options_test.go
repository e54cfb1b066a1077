package options

import (
	"strings"
	"testing"
	"time"
)

func TestParseReadsEachKindBySide(t *testing.T) {
	values, err := Parse([]string{"static-stream-window=32MiB", "keepalive-time=250ms", "keepalive-permit-without-stream=yes",
		"pool=4", "compression=gzip"}, "client")
	if err != nil {
		t.Fatal(err)
	}
	if values["static-stream-window"] != int64(32<<20) || values["keepalive-time"] != 250*time.Millisecond ||
		values["keepalive-permit-without-stream"] != true || values.Pool() != 4 || values["compression"] != "gzip" {
		t.Errorf("parsed %v", values)
	}
	if got := values.Text(); got != "compression=gzip;keepalive-permit-without-stream=true;keepalive-time=250;pool=4;static-stream-window=33554432" {
		t.Errorf("Text() = %q", got)
	}
	delete(values, "keepalive-time") // below grpc-go's client floor: see TestValuesGrpcGoWouldChangeAreRefused
	if _, err := values.DialOptions(); err != nil {
		t.Errorf("DialOptions: %v", err)
	}
}

func TestParseRefusesWithOneLine(t *testing.T) {
	cases := map[string][]string{
		"is a client option, not a server one": {"pool=2"},
		"unknown; known:":                      {"bogus=1"},
		"is not KEY=VALUE":                     {"initial-window"},
		"is not a size in bytes":               {"initial-window=big"},
		"must be at least 1":                   {"max-concurrent-streams=0"},
		"is not gzip or none":                  {"compression=zstd"},
	}
	for want, items := range cases {
		_, err := Parse(items, "server")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%v) = %v; want one line with %q", items, err, want)
		}
	}
}

func TestSizesAboveWhatGrpcGoTakesAreRefused(t *testing.T) {
	for _, key := range []string{"initial-conn-window", "read-buffer", "write-buffer", "max-recv-msg-size", "max-send-msg-size"} {
		values, _ := Parse([]string{key + "=4096MiB"}, "server")
		if _, err := values.ServerOptions(4 << 20); err == nil {
			t.Errorf("a 4 GiB %s was accepted by the server", key)
		}
		if _, err := values.DialOptions(); err == nil {
			t.Errorf("a 4 GiB %s was accepted by the client", key)
		}
	}
}

func TestShortDurationsBecomeOneMillisecond(t *testing.T) {
	values, _ := Parse([]string{"keepalive-min-time=10us"}, "server")
	if values["keepalive-min-time"] != time.Millisecond {
		t.Errorf("got %v", values["keepalive-min-time"])
	}
}

func TestValuesGrpcGoWouldChangeAreRefused(t *testing.T) {
	for _, item := range []string{"initial-window=64000", "static-conn-window=1KiB", "keepalive-time=5s"} {
		values, err := Parse([]string{item}, "client")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := values.DialOptions(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("the client took %s: %v", item, err)
		}
	}
	server, _ := Parse([]string{"keepalive-time=500ms"}, "server")
	if _, err := server.ServerOptions(4 << 20); err == nil {
		t.Error("the server took keepalive-time=500ms")
	}
	ok, _ := Parse([]string{"initial-window=65535", "keepalive-time=10s", "keepalive-timeout=1s"}, "client")
	if _, err := ok.DialOptions(); err != nil {
		t.Errorf("grpc-go's own floors were refused: %v", err)
	}
}
