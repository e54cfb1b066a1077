// Package upload is the client side of `labkit upload` in Go (labkit/echo/upload_agent.py's twin): one cell's
// uploads of a file over gRPC or HTTP/2, timed from the first byte handed to the transport to the server's
// acknowledgement, one JSON line each, on a connection opened and warmed before the first timed upload; and
// the file itself, generated from a seed as the Python side generates it.
package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"labkit/go/internal/address"
	"labkit/go/internal/echo"
	"labkit/go/internal/files"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
)

// Config is what `labkit-go upload-agent` is told: the flags of `labkit echo upload-agent`, the timeout as written.
type Config struct {
	Transport, Target, File, SHA256, Timeout, TLSCA, TLSServerName string
	ChunkSize, DeclareLength                                       int64 // DeclareLength < 0: the file's own
	Repeats, Warmup                                                int
	GRPCOptions                                                    []string
}

// Agent is a Config checked, with the file read and hashed.
type Agent struct {
	Config
	timeout time.Duration
	data    []byte
	sha     string
	options options.Values
	out     io.Writer
	frames  *FrameCounter // the HTTP/2 frames the agent's connection carried
}

// NewAgent checks c as the Python agent does and reads the file; a file whose SHA-256 is not c.SHA256 is refused.
func NewAgent(c Config) (*Agent, error) {
	a := &Agent{Config: c, frames: NewFrameCounter()}
	if c.Transport != "grpc" && c.Transport != "http2" {
		return nil, fmt.Errorf("--transport is grpc or http2, not %q", c.Transport)
	}
	if c.Target == "" {
		return nil, fmt.Errorf("--target HOST:PORT is required")
	}
	if _, _, err := address.Parse(c.Target, false); err != nil {
		return nil, fmt.Errorf("--target: %v", err)
	}
	if c.ChunkSize < 1 || c.ChunkSize > limits.MaxRequestBytes || c.Repeats < 1 || c.Repeats > limits.MaxRepeats ||
		c.Warmup < 0 || c.Warmup > limits.MaxWarmup {
		return nil, fmt.Errorf("--chunk-size must be between 1 and %d, --repeats between 1 and %d, --warmup between 0 and %d",
			limits.MaxRequestBytes, limits.MaxRepeats, limits.MaxWarmup)
	}
	var err error
	if a.options, err = options.Parse(c.GRPCOptions, "client"); err != nil {
		return nil, err
	}
	if len(a.options) > 0 && c.Transport != "grpc" {
		return nil, fmt.Errorf("--grpc-option applies to --transport grpc only")
	}
	if a.timeout, err = limits.ParseDuration("timeout", c.Timeout); err != nil {
		return nil, err
	}
	// A regular file within the bound: /dev/zero would be read (and held) without end.
	if a.data, err = files.ReadRegular(c.File, "file", limits.MaxFileBytes); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(a.data)
	a.sha = hex.EncodeToString(sum[:])
	if c.SHA256 != "" && strings.ToLower(c.SHA256) != a.sha {
		return nil, fmt.Errorf("%s does not have sha256 %s: the file changed on this host", c.File, c.SHA256)
	}
	return a, nil
}

// Run connects, warms the connection up and makes the timed uploads, writing the ready line and a row per
// upload to out as each ends. Cancelling ctx ends the upload in flight; Run then returns ctx's error, and the
// cut upload has no row.
func (a *Agent) Run(ctx context.Context, out io.Writer) error {
	a.out = out
	if a.Transport == "grpc" {
		return a.runGRPC(ctx)
	}
	return a.runHTTP2(ctx)
}

func (a *Agent) declaredLength() string {
	if a.DeclareLength >= 0 {
		return strconv.FormatInt(a.DeclareLength, 10)
	}
	return strconv.Itoa(len(a.data))
}

func (a *Agent) emit(row map[string]any) error {
	line, err := json.Marshal(row)
	if err == nil {
		_, err = a.out.Write(append(line, '\n'))
	}
	return err
}

// emitUnlessCancelled writes the row of an upload that ended, unless ctx cut it short: then it measured
// nothing, and Run ends with ctx's error.
func (a *Agent) emitUnlessCancelled(ctx context.Context, row map[string]any) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return a.emit(row)
}

func (a *Agent) newRow(seq int) map[string]any {
	row := map[string]any{"event": "upload", "seq": seq, "bytes_sent": len(a.data), "chunks": (int64(len(a.data)) + a.ChunkSize - 1) / a.ChunkSize}
	for _, key := range []string{"t_start_utc_ns", "seconds", "mb_per_s", "bytes_acked", "client_cpu_s", "client_cpu_user_s",
		"client_cpu_sys_s", "server_cpu_s", "server_cpu_user_s", "server_cpu_sys_s", "client_rw_syscalls",
		"server_rw_syscalls", "client_frames", "client_data_frames", "client_writes", "ok", "error", "status"} {
		row[key] = nil
	}
	return row
}

// serverKeys are what the server reports of an upload: its CPU seconds, and its read/write system calls.
var serverKeys = []string{"cpu_s", "cpu_user_s", "cpu_sys_s", "rw_syscalls"}

// measured is what the agent's process and connection spent on one upload, read before and after it.
type measured struct {
	cpu    echo.CPUSample
	frames FrameCounts
}

func (a *Agent) measure() measured { return measured{echo.CPUNow(), a.frames.Counts()} }

// finish fills in what every upload row has, as Python's _finish: time, CPU and system calls of both ends, the
// client's frames and writes, the checks.
func (a *Agent) finish(row map[string]any, elapsed time.Duration, before, after measured, acked *int64,
	ackedSHA string, server map[string]any, problems []string) {
	row["seconds"] = elapsed.Seconds()
	for key, value := range after.cpu.Since(before.cpu) {
		row["client_"+key] = value
	}
	frames := after.frames.Sub(before.frames)
	row["client_frames"], row["client_data_frames"], row["client_writes"] = frames.Frames, frames.DataFrames, frames.Writes
	for _, key := range serverKeys {
		row["server_"+key] = server[key]
	}
	if acked != nil {
		row["bytes_acked"] = *acked
		if *acked != int64(len(a.data)) {
			problems = append(problems, fmt.Sprintf("server acknowledged %d bytes, sent %d", *acked, len(a.data)))
		}
	}
	if ackedSHA != "" && ackedSHA != a.sha {
		problems = append(problems, fmt.Sprintf("server computed sha256 %s, sent %s", ackedSHA, a.sha))
	}
	row["ok"] = len(problems) == 0
	if len(problems) > 0 {
		row["error"] = strings.Join(problems, "; ")
	} else if elapsed > 0 {
		row["mb_per_s"] = float64(len(a.data)) / elapsed.Seconds() / 1e6
	}
}
