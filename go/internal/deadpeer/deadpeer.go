// Package deadpeer measures what client keepalive is for: how long a grpc-go client takes to notice that its
// server is silently gone (a network partition, a host that vanished without a FIN or RST), the work of
// `labkit-go dead-peer`. The client makes one Echo (the connection READY), opens an EchoStream and makes one
// round trip on it, then holds it open with no message outstanding, as a client waiting on a server's stream of
// answers does, and reports when the stream fails: that is the moment grpc-go declared the connection dead.
//
// What can notice, and when (grpc-go v1.85, Linux):
//   - grpc-go's keepalive (keepalive-time T, keepalive-timeout O): a PING goes out T after the last frame read
//     and the connection is closed O later when no frame came back, so a peer gone silent at P is noticed at
//     last read + T + O: between T + O − (P − last read) and T + O after P. grpc-go also sets TCP_USER_TIMEOUT
//     to O, so unacknowledged bytes (the PING itself, a call's request) end the connection after O in the kernel.
//   - TCP keepalive: grpc-go's own dialer sets SO_KEEPALIVE and leaves its timers to the kernel
//     (net.ipv4.tcp_keepalive_time, 7200 s by default), which the ready line reports from the socket itself.
//   - TCP retransmission: only while bytes are unacknowledged; with no call in flight there are none.
//
// With ProbeEvery, one Echo is also made that often on the same connection (application traffic): a probe in
// flight when the peer went silent fails by its deadline, or with the connection.
package deadpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
)

// Config is one measurement: the server at Target, dialled with Dial; after the ready line, wait up to Wait
// for the client to notice; Timeout is the deadline of the first Echo, of the stream's first round trip and of
// each probe; ProbeEvery 0 makes no probes.
type Config struct {
	Target     string
	Dial       echo.Dial
	Wait       time.Duration
	Timeout    time.Duration
	ProbeEvery time.Duration
}

// Check refuses a config that cannot run before anything connects.
func (c Config) Check() error {
	switch {
	case c.Target == "":
		return errors.New("--target: give HOST:PORT")
	case c.Wait <= 0:
		return errors.New("--wait must be longer than 0")
	case c.Timeout <= 0:
		return errors.New("--timeout must be longer than 0")
	case c.ProbeEvery < 0:
		return errors.New("--probe-every must not be negative")
	}
	return nil
}

// Run measures once: it writes the ready line and then the noticed or not_noticed line on out, each one JSON
// object (see the package comment). It returns an error, and writes no line, when the server cannot be
// reached before the ready line; ctx's error when ctx is cancelled (a signal).
func Run(ctx context.Context, c Config, out func(map[string]any) error) error {
	if err := c.Check(); err != nil {
		return err
	}
	holder := &echo.ConnHolder{}
	dial := c.Dial
	// The connection grpc-go dials itself (its dialer decides TCP keepalive), kept as it reaches the handshake.
	dial.WrapCredentials = func(creds credentials.TransportCredentials) credentials.TransportCredentials {
		return capture{creds, holder}
	}
	options, err := dial.DialOptions()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(c.Target, options...)
	if err != nil {
		return fmt.Errorf("cannot use target %s: %v", c.Target, err)
	}
	defer conn.Close()
	stub := echopb.NewEchoServiceClient(conn)
	if first := echo.TimedEcho(ctx, stub, nil, c.Timeout); first.Code != "OK" || first.Detail != "" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the first Echo to %s failed: %s", c.Target, first.Detail)
	}
	streamCtx, cancelStream := context.WithCancel(ctx)
	defer cancelStream()
	stream, err := openStream(streamCtx, stub, c.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the EchoStream to %s failed: %v", c.Target, err)
	}
	ready := time.Now()
	line := map[string]any{"event": "ready", "t_ns": ready.UnixNano(), "target": c.Target,
		"keepalive": keepalive(c.Dial), "probe_every_s": c.ProbeEvery.Seconds(), "wait_s": c.Wait.Seconds(),
		"grpc_go_version": grpc.Version}
	if raw := holder.Get(); raw != nil {
		line["local"], line["remote"] = raw.LocalAddr().String(), raw.RemoteAddr().String()
		line["tcp"] = socketKeepalive(raw)
	}
	if err := out(line); err != nil {
		return err
	}

	failed := make(chan error, 1)
	go func() {
		// No request is outstanding: the server has nothing to send until the stream or its connection ends.
		_, err := stream.Recv()
		failed <- err
	}()
	probes := startProbes(streamCtx, stub, c.ProbeEvery, c.Timeout)
	timer := time.NewTimer(c.Wait)
	defer timer.Stop()
	select {
	case err := <-failed:
		noticed := time.Now()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		code, detail := "OK", "the server ended the stream"
		if err == nil {
			detail = "the server answered a request never sent"
		} else if err != io.EOF {
			st := status.Convert(err)
			code, detail = echo.CodeName(st.Code()), st.Message()
		}
		line := map[string]any{"event": "noticed", "t_ns": noticed.UnixNano(),
			"after_ready_s": noticed.Sub(ready).Seconds(), "code": code, "detail": detail}
		return out(probes.stop(line))
	case <-timer.C:
		return out(probes.stop(map[string]any{"event": "not_noticed", "t_ns": time.Now().UnixNano(),
			"waited_s": c.Wait.Seconds()}))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openStream opens an EchoStream and makes one round trip on it, within timeout: the stream then exists at
// both ends, and nothing is outstanding on it.
func openStream(ctx context.Context, stub echopb.EchoServiceClient, timeout time.Duration) (grpc.BidiStreamingClient[echopb.EchoRequest, echopb.EchoResponse], error) {
	stream, err := stub.EchoStream(ctx)
	if err != nil {
		return nil, err
	}
	answered := make(chan error, 1)
	go func() {
		if err := stream.Send(&echopb.EchoRequest{}); err != nil {
			answered <- err
			return
		}
		_, err := stream.Recv()
		answered <- err
	}()
	select {
	case err := <-answered:
		return stream, err
	case <-time.After(timeout):
		return nil, fmt.Errorf("no answer on the stream within %v", timeout)
	}
}

// keepalive is the client keepalive as its --grpc-option values give it to grpc-go (nil, JSON's null: no pings).
func keepalive(d echo.Dial) any {
	t, on := d.Options["keepalive-time"].(time.Duration)
	if !on {
		return nil // a timeout alone turns no pings on (options.DialOptions)
	}
	kp := map[string]any{"time_s": t.Seconds(), "timeout_s": 20.0, "permit_without_stream": false} // grpc-go's defaults
	if timeout, ok := d.Options["keepalive-timeout"].(time.Duration); ok {
		kp["timeout_s"] = timeout.Seconds()
	}
	if permit, ok := d.Options["keepalive-permit-without-stream"].(bool); ok {
		kp["permit_without_stream"] = permit
	}
	return kp
}

// socketKeepalive reads what the kernel will do for the connection by itself: TCP keepalive (on or off, its
// idle time, interval and count) and TCP_USER_TIMEOUT (0: the kernel's retransmission limit).
func socketKeepalive(conn net.Conn) map[string]any {
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return nil
	}
	values := map[string]any{}
	_ = raw.Control(func(fd uintptr) {
		read := func(level, option int) int {
			v, err := unix.GetsockoptInt(int(fd), level, option)
			if err != nil {
				return -1
			}
			return v
		}
		values["keepalive"] = read(unix.SOL_SOCKET, unix.SO_KEEPALIVE) == 1
		values["keepidle_s"] = read(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
		values["keepintvl_s"] = read(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
		values["keepcnt"] = read(unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
		values["user_timeout_ms"] = read(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	})
	return values
}

// capture keeps the raw connection grpc-go dialled, for its socket options.
type capture struct {
	credentials.TransportCredentials
	holder *echo.ConnHolder
}

func (c capture) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c.holder.Set(raw)
	return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

func (c capture) Clone() credentials.TransportCredentials {
	return capture{c.TransportCredentials.Clone(), c.holder}
}

// prober makes one Echo every interval on its own goroutine until stopped, counting what became of them.
type prober struct {
	cancel       context.CancelFunc
	done         chan struct{}
	mu           sync.Mutex
	ok, failed   int
	firstFailure map[string]any
	enabled      bool
}

func startProbes(parent context.Context, stub echopb.EchoServiceClient, every, timeout time.Duration) *prober {
	p := &prober{done: make(chan struct{}), enabled: every > 0}
	if !p.enabled {
		close(p.done)
		return p
	}
	ctx, cancel := context.WithCancel(parent)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			started := time.Now()
			outcome := echo.TimedEcho(ctx, stub, nil, timeout)
			if ctx.Err() != nil {
				return // stopped while it was in flight: not an outcome
			}
			p.mu.Lock()
			if outcome.Code == "OK" && outcome.Detail == "" {
				p.ok++
			} else {
				p.failed++
				if p.firstFailure == nil {
					p.firstFailure = map[string]any{"t_ns": started.UnixNano(), "failed_t_ns": time.Now().UnixNano(),
						"code": outcome.Code, "detail": outcome.Detail}
				}
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// stop ends the probes (a probe in flight is abandoned) and adds their counts to line.
func (p *prober) stop(line map[string]any) map[string]any {
	if !p.enabled {
		return line
	}
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	line["probes_ok"], line["probes_failed"], line["first_probe_failure"] = p.ok, p.failed, p.firstFailure
	return line
}
