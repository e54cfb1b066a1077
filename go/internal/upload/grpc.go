package upload

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
)

func (a *Agent) runGRPC(ctx context.Context) error {
	started := time.Now()
	dial, err := echo.Dial{TLSCA: a.TLSCA, TLSServerName: a.TLSServerName, Options: a.options,
		WrapCredentials: a.frames.Credentials}.DialOptions()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(a.Target, dial...)
	if err != nil {
		return fmt.Errorf("cannot use target %s: %v", a.Target, err)
	}
	defer conn.Close()
	stub := echopb.NewEchoServiceClient(conn)
	if err := waitReady(ctx, conn, a.timeout); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot connect to the gRPC server at %s within %g s", a.Target, a.timeout.Seconds())
	}
	connected := time.Now()
	for range a.Warmup {
		warmupCtx, cancel := context.WithTimeout(ctx, a.timeout)
		_, err := a.grpcUpload(warmupCtx, stub, []byte{0}, metadata.MD{})
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("the warm-up upload to %s failed: %v", a.Target, status.Convert(err).Message())
		}
	}
	if err := a.emit(map[string]any{"event": "ready", "transport": "grpc", "target": a.Target,
		"connect_s": connected.Sub(started).Seconds(), "warmup_s": time.Since(connected).Seconds()}); err != nil {
		return err
	}
	md := metadata.Pairs(echo.ExpectedLengthKey, a.declaredLength(), echo.ExpectedSHA256Key, a.sha)
	for seq := range a.Repeats {
		row := a.newRow(seq)
		a.finishGRPC(ctx, row, stub, md)
		if err := a.emitUnlessCancelled(ctx, row); err != nil {
			return err
		}
	}
	return nil
}

// finishGRPC makes one timed Upload and fills in its row: the timer stops at the server's UploadStatus.
func (a *Agent) finishGRPC(ctx context.Context, row map[string]any, stub echopb.EchoServiceClient, md metadata.MD) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var trailer metadata.MD
	before := a.measure()
	row["t_start_utc_ns"] = time.Now().UnixNano()
	start := time.Now()
	result, err := a.grpcUpload(ctx, stub, a.data, md, grpc.Trailer(&trailer))
	elapsed, after := time.Since(start), a.measure()
	if err != nil {
		st := status.Convert(err)
		row["status"] = echo.CodeName(st.Code())
		problem := fmt.Sprintf("%s: %s", echo.CodeName(st.Code()), st.Message())
		a.finish(row, elapsed, before, after, nil, "", map[string]any{}, []string{problem})
		return
	}
	row["status"] = "OK"
	var problems []string
	if result.GetCode() != echopb.UploadStatusCode_OK {
		reason := result.GetMessage()
		if reason == "" {
			reason = result.GetCode().String()
		}
		problems = append(problems, "server: "+reason)
	}
	received := result.GetBytesReceived()
	a.finish(row, elapsed, before, after, &received, result.GetSha256(), serverCPU(trailer), problems)
}

// serverCPU reads the server's CPU seconds and system calls from the labkit-server-* trailers (absent ones stay
// null).
func serverCPU(trailer metadata.MD) map[string]any {
	server := map[string]any{}
	for _, key := range serverKeys {
		if values := trailer.Get("labkit-server-" + strings.ReplaceAll(key, "_", "-")); len(values) > 0 {
			if v, err := strconv.ParseFloat(values[0], 64); err == nil {
				server[key] = v
			}
		}
	}
	return server
}

// waitReady opens the channel's connection and waits until it is READY, as Python's
// channel_ready_future: the connection is made before the first upload, outside every timer.
func waitReady(parent context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(ctx, state) {
			return ctx.Err()
		}
	}
	return nil
}

// grpcUpload sends data in chunks on one Upload stream and waits for the server's status.
func (a *Agent) grpcUpload(ctx context.Context, stub echopb.EchoServiceClient, data []byte, md metadata.MD,
	opts ...grpc.CallOption) (*echopb.UploadStatus, error) {
	stream, err := stub.Upload(metadata.NewOutgoingContext(ctx, md), opts...)
	if err != nil {
		return nil, err
	}
	for offset := int64(0); offset < int64(len(data)); offset += a.ChunkSize {
		if err := stream.Send(&echopb.Chunk{Content: data[offset:min(offset+a.ChunkSize, int64(len(data)))]}); err != nil {
			break // the status below says why
		}
	}
	return stream.CloseAndRecv()
}
