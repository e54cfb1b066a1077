// Package echo is the Go twin of labkit/echo: the gRPC echo service, the raw TCP echo and the
// HTTP/2 endpoint of `labkit echo serve`, answering exactly as the Python server does, so that
// an experiment can swap one implementation for the other and change nothing else.
package echo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"labkit/go/echopb"
)

// Optional Upload metadata (and HTTP/2 headers): what the client declares, checked by the server.
const (
	ExpectedLengthKey = "labkit-expected-length"
	ExpectedSHA256Key = "labkit-expected-sha256"
)

// ServerTimeKey is the trailer with the server's time on a call, in integer nanoseconds of the monotonic clock: from
// the handler's start (the request read and decoded) to the response handed to gRPC, as the Python server sends it.
// ServerRecvKey and ServerSendKey are the server's wall clock at those two moments, integer ns since the epoch:
// with the client's own wall clock at the send and the reply, they split the round trip by direction
// (labkit/echo/stamps.py).
const (
	ServerTimeKey = "labkit-server-ns"
	ServerRecvKey = "labkit-server-recv-utc-ns"
	ServerSendKey = "labkit-server-send-utc-ns"
)

// Service answers every request with its length, and counts and hashes uploads.
type Service struct {
	echopb.UnimplementedEchoServiceServer
}

// Echo returns only the length it received: what a client measures is the network and the stack. Its own time
// and its wall clock at both ends go back in trailers, so that a client can tell server time from network time,
// and the way out from the way back.
func (Service) Echo(ctx context.Context, req *echopb.EchoRequest) (*echopb.EchoResponse, error) {
	start := time.Now()
	response := &echopb.EchoResponse{PayloadLength: int64(len(req.GetPayload()))}
	elapsed := time.Since(start).Nanoseconds()
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ServerTimeKey, strconv.FormatInt(elapsed, 10),
		ServerRecvKey, strconv.FormatInt(start.UnixNano(), 10), ServerSendKey, strconv.FormatInt(start.UnixNano()+elapsed, 10)))
	return response, nil
}

// EchoStream answers each request of the stream with its length.
func (Service) EchoStream(stream grpc.BidiStreamingServer[echopb.EchoRequest, echopb.EchoResponse]) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&echopb.EchoResponse{PayloadLength: int64(len(req.GetPayload()))}); err != nil {
			return err
		}
	}
}

// Upload hashes while receiving (never holding more than one chunk), checks what the client
// declared, and returns the process's CPU seconds of the call in trailing metadata.
func (Service) Upload(stream grpc.ClientStreamingServer[echopb.Chunk, echopb.UploadStatus]) error {
	start := CPUNow()
	declared, _ := metadata.FromIncomingContext(stream.Context())
	digest := sha256.New()
	var received, chunks int64
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		digest.Write(chunk.GetContent())
		received += int64(len(chunk.GetContent()))
		chunks++
	}
	sum := hex.EncodeToString(digest.Sum(nil))
	problems := Mismatches(first(declared, ExpectedLengthKey), first(declared, ExpectedSHA256Key), received, sum)
	trailer := metadata.MD{}
	for key, value := range CPUNow().Since(start) {
		trailer.Set("labkit-server-"+strings.ReplaceAll(key, "_", "-"), strconv.FormatFloat(value, 'f', -1, 64))
	}
	stream.SetTrailer(trailer)
	status := &echopb.UploadStatus{Message: fmt.Sprintf("received %d chunks", chunks), Code: echopb.UploadStatusCode_OK,
		BytesReceived: received, Sha256: sum}
	if len(problems) > 0 {
		status.Message, status.Code = strings.Join(problems, "; "), echopb.UploadStatusCode_FAILED
	}
	return stream.SendAndClose(status)
}

func first(md metadata.MD, key string) *string {
	if values := md.Get(key); len(values) > 0 {
		return &values[0]
	}
	return nil
}

// Mismatches says how an upload differs from what its client declared (nothing declared: nothing to differ).
func Mismatches(expectedLength, expectedSHA256 *string, received int64, sum string) []string {
	var problems []string
	if expectedLength != nil && *expectedLength != strconv.FormatInt(received, 10) {
		problems = append(problems, fmt.Sprintf("expected %s bytes, received %d", *expectedLength, received))
	}
	if expectedSHA256 != nil && strings.ToLower(*expectedSHA256) != sum {
		problems = append(problems, fmt.Sprintf("expected sha256 %s, received %s", *expectedSHA256, sum))
	}
	return problems
}
