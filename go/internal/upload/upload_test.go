package upload_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"labkit/go/internal/echo"
	"labkit/go/internal/echo/echotest"
	"labkit/go/internal/limits"
	"labkit/go/internal/upload"
)

// rowFields are the fields of every upload row, as labkit/echo/upload_agent.py ROW_FIELDS with event and seq.
var rowFields = []string{"bytes_acked", "bytes_sent", "chunks", "client_cpu_s", "client_cpu_sys_s", "client_cpu_user_s",
	"client_data_frames", "client_frames", "client_rw_syscalls", "client_writes", "error", "event", "mb_per_s", "ok",
	"seconds", "seq", "server_cpu_s", "server_cpu_sys_s", "server_cpu_user_s", "server_rw_syscalls", "status",
	"t_start_utc_ns"}

// file is a 100-byte file to upload.
func file(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "upload.bin")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func config(t *testing.T, transport, target string, change func(*upload.Config)) upload.Config {
	c := upload.Config{Transport: transport, Target: target, File: file(t), Timeout: "10s", ChunkSize: 30, Repeats: 2,
		Warmup: 1, DeclareLength: -1}
	if change != nil {
		change(&c)
	}
	return c
}

// run makes the uploads and returns the agent's lines, decoded, and Run's error.
func run(t *testing.T, c upload.Config) ([]map[string]any, error) {
	t.Helper()
	agent, err := upload.NewAgent(c)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = agent.Run(context.Background(), &out)
	return echotest.JSONLines(t, out.String()), err
}

// Both transports against the real server: the ready line once the connection is warm, then a row per upload,
// numbered, its 100 bytes in 4 chunks acknowledged whole, with both ends' CPU.
func TestEachUploadIsARowAfterTheReadyLine(t *testing.T) {
	server := echotest.Start(t)
	for transport, target := range map[string]string{"grpc": server.Target, "http2": server.HTTP2Target} {
		lines, err := run(t, config(t, transport, target, nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != 3 || lines[0]["event"] != "ready" || lines[0]["transport"] != transport || lines[0]["target"] != target {
			t.Fatalf("%s: %v", transport, lines)
		}
		for seq, row := range lines[1:] {
			if keys := slices.Sorted(maps.Keys(row)); !slices.Equal(keys, rowFields) {
				t.Fatalf("%s row has %v", transport, keys)
			}
			status := map[string]string{"grpc": "OK", "http2": "200"}[transport]
			if row["seq"] != float64(seq) || row["ok"] != true || row["error"] != nil || row["status"] != status ||
				row["bytes_sent"] != 100.0 || row["bytes_acked"] != 100.0 || row["chunks"] != 4.0 ||
				row["mb_per_s"].(float64) <= 0 || row["server_cpu_s"] == nil || row["client_cpu_s"] == nil {
				t.Fatalf("%s row %d: %v", transport, seq, row)
			}
			// Each 30-byte chunk left as a DATA frame of its own (gRPC's with its 5-byte prefix), and the process
			// wrote them with system calls the kernel counted; the server counted its reads.
			frames, data := row["client_frames"].(float64), row["client_data_frames"].(float64)
			if data < 4 || frames < data || row["client_writes"].(float64) < 1 ||
				row["client_rw_syscalls"].(float64) < 1 || row["server_rw_syscalls"].(float64) < 1 {
				t.Fatalf("%s row %d: frames, writes or system calls: %v", transport, seq, row)
			}
		}
	}
}

// The frames a chunk size becomes, counted: a 100-byte file in 1-byte chunks is at least 100 DATA frames on both
// transports, in 50-byte chunks a handful.
func TestSmallerChunksAreMoreDataFrames(t *testing.T) {
	server := echotest.Start(t)
	for transport, target := range map[string]string{"grpc": server.Target, "http2": server.HTTP2Target} {
		counts := map[int64]float64{}
		for _, chunk := range []int64{1, 50} {
			lines, err := run(t, config(t, transport, target, func(c *upload.Config) { c.ChunkSize, c.Repeats = chunk, 1 }))
			if err != nil {
				t.Fatal(err)
			}
			counts[chunk] = lines[1]["client_data_frames"].(float64)
		}
		if counts[1] < 100 || counts[50] < 2 || counts[50] > 10 {
			t.Fatalf("%s: DATA frames by chunk size %v", transport, counts)
		}
	}
}

// What the server refuses is the row's error, in the Python agent's words: a declared length that is not the
// file's, and over HTTP/2 a body above the server's bound.
func TestTheServersRefusalIsTheRowsError(t *testing.T) {
	server := echotest.Start(t)
	bounded := echotest.Start(t, func(c *echo.ServerConfig) { c.MaxUploadBytes = 50 })
	declared := func(c *upload.Config) { c.DeclareLength, c.Repeats = 5, 1 }
	for _, tc := range []struct {
		transport, target, status, error string
		change                           func(*upload.Config)
	}{
		{"grpc", server.Target, "OK", "server: expected 5 bytes, received 100", declared},
		{"http2", server.HTTP2Target, "422", "HTTP 422: expected 5 bytes, received 100", declared},
		{"http2", bounded.HTTP2Target, "413", "HTTP 413: upload too large", func(c *upload.Config) { c.Repeats = 1 }},
	} {
		lines, err := run(t, config(t, tc.transport, tc.target, tc.change))
		if err != nil {
			t.Fatal(err)
		}
		row := lines[1]
		if row["ok"] != false || row["status"] != tc.status || !strings.HasPrefix(row["error"].(string), tc.error) || row["mb_per_s"] != nil {
			t.Fatalf("%s, %s: %v", tc.transport, tc.error, row)
		}
	}
}

// Nothing listens: the agent says it cannot connect, in one line, and writes nothing.
func TestAClosedPortIsOneLine(t *testing.T) {
	for transport, says := range map[string]string{
		"grpc":  "cannot connect to the gRPC server at 127.0.0.1:1 within 0.2 s",
		"http2": "cannot connect to 127.0.0.1:1: connect: connection refused",
	} {
		lines, err := run(t, config(t, transport, echotest.ClosedPort, func(c *upload.Config) { c.Timeout = "0.2s" }))
		if err == nil || err.Error() != says || len(lines) != 0 {
			t.Fatalf("%s: %v, %v", transport, err, lines)
		}
	}
}

// A signal (the context cancelled) while an upload waits an hour on a server that takes it and never answers:
// Run ends now, and the cut upload has no row.
func TestCancellingStopsAnUploadInFlight(t *testing.T) {
	target, callArrived := echotest.Silent(t)
	agent, err := upload.NewAgent(config(t, "grpc", target, func(c *upload.Config) { c.Timeout, c.Warmup = "1h", 0 }))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = echotest.CancelWhen(t, callArrived, func(ctx context.Context) error { return agent.Run(ctx, &out) })
	if !errors.Is(err, context.Canceled) || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), `"event":"ready"`) {
		t.Fatalf("%v; wrote %q", err, out.String())
	}
}

// What the Python agent refuses, in one line each, before anything is dialled.
func TestTheBoundsAreRefused(t *testing.T) {
	above := fmt.Sprintf("%ds", int64(limits.MaxDuration/time.Second)+1)
	for _, tc := range []struct {
		change func(*upload.Config)
		says   string
	}{
		{func(c *upload.Config) { c.Transport = "h3" }, `--transport is grpc or http2, not "h3"`},
		{func(c *upload.Config) { c.Target = "" }, "--target HOST:PORT is required"},
		{func(c *upload.Config) { c.ChunkSize = limits.MaxRequestBytes + 1 }, "--chunk-size must be between 1 and 1073741824"},
		{func(c *upload.Config) { c.Repeats = limits.MaxRepeats + 1 }, "--repeats between 1 and 1000000"},
		{func(c *upload.Config) { c.Warmup = limits.MaxWarmup + 1 }, "--warmup between 0 and 10000"},
		{func(c *upload.Config) { c.Transport, c.GRPCOptions = "http2", []string{"pool=2"} }, "--grpc-option applies to --transport grpc only"},
		{func(c *upload.Config) { c.Timeout = above }, `--timeout: "` + above + `" is longer than 168h`},
		{func(c *upload.Config) { c.File = "/nonexistent" }, "cannot read /nonexistent: no such file or directory"},
		{func(c *upload.Config) { c.File = "/dev/zero" }, "--file /dev/zero is not a regular file"},
		{func(c *upload.Config) { c.SHA256 = "ab" }, "does not have sha256 ab: the file changed on this host"},
	} {
		c := config(t, "grpc", echotest.ClosedPort, tc.change)
		_, err := upload.NewAgent(c)
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c, err, tc.says)
		}
	}
}

// The generated file is the Python agent's byte for byte (its SHA-256 from labkit.echo.upload_agent.make_file
// with the same size and seed), made once; a file named without --size is only hashed.
func TestTheGeneratedFileIsThePythonAgentsAndMadeOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "f")
	want := "8eac84c4f834776c49221ca2dbc079cd0c51eba38aef4bb741fc9d78d3a6e1ae"
	for _, generated := range []bool{true, false} {
		facts, err := upload.File{Path: path, Size: 2_500_000, Seed: 7, Generate: true}.Facts()
		if err != nil {
			t.Fatal(err)
		}
		if facts["generated"] != generated || facts["bytes"] != int64(2_500_000) || facts["sha256"] != want || facts["event"] != "file" {
			t.Fatalf("%v", facts)
		}
	}
	facts, err := upload.File{Path: path}.Facts()
	if _, asked := facts["generated"]; err != nil || asked || facts["sha256"] != want {
		t.Fatalf("%v, %v", facts, err)
	}
	for _, tc := range []struct {
		file upload.File
		says string
	}{
		{upload.File{}, "--path is required"},
		{upload.File{Path: path, Size: limits.MaxFileBytes + 1, Generate: true}, "file size must be between 1 byte and 1073741824, not 1073741825"},
		{upload.File{Path: path + "-missing"}, "--path: cannot read " + path + "-missing: no such file or directory"},
		{upload.File{Path: "/dev/zero"}, "--path /dev/zero is not a regular file (a device, FIFO or socket), so it has no end to read to"},
	} {
		if _, err := tc.file.Facts(); err == nil || err.Error() != tc.says {
			t.Errorf("%+v: %v, want %q", tc.file, err, tc.says)
		}
	}
}
