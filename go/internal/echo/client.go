package echo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/files"
	"labkit/go/internal/options"
)

// Dial is how a client reaches the echo server: plain or TLS (TLSCA, a PEM root; TLSServerName, the name to
// check instead of the host), keepalive pings every KeepaliveMs (0: none), and the --grpc-option values.
// WrapCredentials, when set, wraps the transport credentials (plain or TLS), e.g. to count what crosses them.
type Dial struct {
	TLSCA, TLSServerName string
	KeepaliveMs          int
	Options              options.Values
	WrapCredentials      func(credentials.TransportCredentials) credentials.TransportCredentials
}

// DialOptions are grpc-go's dial options for d.
func (d Dial) DialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if d.TLSCA != "" {
		config, err := files.ClientTLS(d.TLSCA, d.TLSServerName)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(config)
	}
	if d.WrapCredentials != nil {
		creds = d.WrapCredentials(creds)
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if d.KeepaliveMs > 0 {
		// grpc-go raises a client keepalive below 10 s to 10 s; the Python client pings as asked.
		every := time.Duration(d.KeepaliveMs) * time.Millisecond
		dial = append(dial, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: every, Timeout: max(every, 20*time.Second), PermitWithoutStream: true}))
	}
	if d.Options == nil {
		return dial, nil
	}
	optionDial, err := d.Options.DialOptions()
	if err != nil {
		return nil, err
	}
	return append(dial, optionDial...), nil
}

// Outcome is one timed Echo: when it started, its latency, its status, why it failed ("" when ok), and what
// the server stamped in its trailers.
type Outcome struct {
	Started time.Time
	RTT     time.Duration
	Code    string
	Detail  string
	Server  Stamps
}

// Stamps are what an echo server stamped on a call (each -1 when it sent none): its own time on it, and its wall
// clock, ns since the epoch, when the request was in and when the reply left.
type Stamps struct {
	ServerNs, RecvUTC, SendUTC int64
}

// NoStamps is a call the server stamped nothing on.
var NoStamps = Stamps{-1, -1, -1}

// Row puts the stamps in a row or sample as the Python clients do: server_ns, server_recv_utc_ns and
// server_send_utc_ns, null where the server sent none.
func (s Stamps) Row(row map[string]any) {
	for key, value := range map[string]int64{"server_ns": s.ServerNs, "server_recv_utc_ns": s.RecvUTC,
		"server_send_utc_ns": s.SendUTC} {
		if value < 0 {
			row[key] = nil
		} else {
			row[key] = value
		}
	}
}

func trailerStamps(trailer metadata.MD) Stamps {
	stamps := NoStamps
	for key, field := range map[string]*int64{ServerTimeKey: &stamps.ServerNs, ServerRecvKey: &stamps.RecvUTC,
		ServerSendKey: &stamps.SendUTC} {
		if values := trailer.Get(key); len(values) > 0 {
			if ns, err := strconv.ParseInt(values[0], 10, 64); err == nil && ns >= 0 {
				*field = ns
			}
		}
	}
	return stamps
}

// TimedEcho calls Echo once, timed around the blocking call alone; a failure is an outcome, not an error.
func TimedEcho(parent context.Context, stub echopb.EchoServiceClient, payload []byte, timeout time.Duration) Outcome {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	request := &echopb.EchoRequest{Payload: payload}
	var trailer metadata.MD
	started := time.Now()
	response, err := stub.Echo(ctx, request, grpc.Trailer(&trailer))
	outcome := Outcome{Started: started, RTT: time.Since(started), Code: "OK", Server: trailerStamps(trailer)}
	if err != nil {
		st := status.Convert(err)
		outcome.Code, outcome.Detail = CodeName(st.Code()), st.Message()
		if outcome.Detail == "" {
			outcome.Detail = outcome.Code
		}
		return outcome
	}
	if response.GetPayloadLength() != int64(len(payload)) {
		outcome.Detail = fmt.Sprintf("server reported payload_length %d, sent %d bytes", response.GetPayloadLength(), len(payload))
	}
	return outcome
}

// CodeName is a status code as grpcio names it (DEADLINE_EXCEEDED, not DeadlineExceeded).
func CodeName(code codes.Code) string {
	name := code.String()
	var out strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			out.WriteByte('_')
		}
		out.WriteRune(r)
	}
	return strings.ToUpper(out.String())
}
