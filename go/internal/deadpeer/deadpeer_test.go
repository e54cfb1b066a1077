package deadpeer

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"labkit/go/internal/echo"
	"labkit/go/internal/echo/echotest"
	"labkit/go/internal/options"
)

// relay forwards TCP connections between the client and the real echo server until partition, after which it
// drops every byte in both directions and closes nothing: to each end the other has gone silent, as in a
// network partition or a host that vanished, and neither kernel sees a FIN or RST.
type relay struct {
	listener    net.Listener
	partitioned atomic.Bool
	mu          sync.Mutex
	conns       []net.Conn
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{listener: listener}
	t.Cleanup(func() { listener.Close(); r.close() })
	go func() {
		for {
			client, err := listener.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, client, server)
			r.mu.Unlock()
			go r.pump(server, client)
			go r.pump(client, server)
		}
	}()
	return r
}

// pump copies src to dst while the relay is whole, and reads and drops what src sends once it is partitioned.
func (r *relay) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.partitioned.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *relay) partition() { r.partitioned.Store(true) }

// close closes every socket of the relay: both ends see the other leave (a FIN).
func (r *relay) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, conn := range r.conns {
		conn.Close()
	}
}

func (r *relay) target() string { return r.listener.Addr().String() }

// measurement runs Run in its own goroutine, handing each line to lines and its error to done.
type measurement struct {
	lines chan map[string]any
	done  chan error
}

func start(t *testing.T, ctx context.Context, c Config) measurement {
	t.Helper()
	m := measurement{lines: make(chan map[string]any, 4), done: make(chan error, 1)}
	go func() {
		m.done <- Run(ctx, c, func(line map[string]any) error { m.lines <- line; return nil })
	}()
	return m
}

// next is the next line, within ceiling (a bound on a wait, not a timing).
func (m measurement) next(t *testing.T, ceiling time.Duration) map[string]any {
	t.Helper()
	select {
	case line := <-m.lines:
		return line
	case err := <-m.done:
		// Run hands over its last line and then returns: both may be ready when select looks, and select picks
		// either. A line already handed over came first; the end is put back for the caller's <-m.done.
		select {
		case line := <-m.lines:
			m.done <- err
			return line
		default:
		}
		t.Fatalf("the measurement ended without its line: %v", err)
	case <-time.After(ceiling):
		t.Fatalf("no line within %v", ceiling)
	}
	return nil
}

func clientOptions(t *testing.T, items ...string) options.Values {
	t.Helper()
	values, err := options.Parse(items, "client")
	if err != nil {
		t.Fatal(err)
	}
	return values
}

func nanos(t *testing.T, line map[string]any) int64 {
	t.Helper()
	v, ok := line["t_ns"].(int64)
	if !ok {
		t.Fatalf("t_ns in %v", line)
	}
	return v
}

func TestKeepaliveNoticesAPartitionWithinItsTimePlusTimeout(t *testing.T) {
	server := echotest.Start(t)
	r := startRelay(t, server.Target)
	// 10 s is grpc-go's least client keepalive time (labkit refuses a shorter one); the timeout is shortened.
	const keepaliveTime, keepaliveTimeout = 10 * time.Second, time.Second
	c := Config{Target: r.target(), Wait: time.Minute, Timeout: 5 * time.Second, Dial: echo.Dial{
		Options: clientOptions(t, "keepalive-time=10s", "keepalive-timeout=1s", "keepalive-permit-without-stream=true")}}
	m := start(t, context.Background(), c)
	ready := m.next(t, echotest.FailAfter)
	if ready["event"] != "ready" {
		t.Fatalf("first line %v", ready)
	}
	kp := ready["keepalive"].(map[string]any)
	if kp["time_s"] != 10.0 || kp["timeout_s"] != 1.0 || kp["permit_without_stream"] != true {
		t.Fatalf("keepalive %v", kp)
	}
	// grpc-go puts its keepalive timeout on the socket as TCP_USER_TIMEOUT, beside the kernel's TCP keepalive.
	tcp := ready["tcp"].(map[string]any)
	if tcp["user_timeout_ms"] != 1000 || tcp["keepalive"] != true {
		t.Fatalf("socket options %v", tcp)
	}
	r.partition()
	partitioned := time.Now().UnixNano()
	// The ceiling is generous; the assertion below is the semantic bound.
	noticed := m.next(t, keepaliveTime+keepaliveTimeout+echotest.FailAfter)
	if noticed["event"] != "noticed" || noticed["code"] != "UNAVAILABLE" {
		t.Fatalf("after the partition: %v", noticed)
	}
	if !strings.Contains(noticed["detail"].(string), "keepalive") {
		t.Fatalf("noticed, but not by keepalive: %v", noticed)
	}
	after := time.Duration(nanos(t, noticed) - partitioned)
	// The PING goes out keepalive-time after the last frame read (just before the partition), and the connection
	// is closed keepalive-timeout later; the slack is for a loaded machine, not a tolerance of the mechanism.
	const slack = 5 * time.Second
	if after <= 0 || after > keepaliveTime+keepaliveTimeout+slack {
		t.Fatalf("noticed %v after the partition, outside (0, %v]", after, keepaliveTime+keepaliveTimeout+slack)
	}
	if err := <-m.done; err != nil {
		t.Fatal(err)
	}
}

func TestWithoutKeepaliveAPartitionGoesUnnoticed(t *testing.T) {
	server := echotest.Start(t)
	r := startRelay(t, server.Target)
	c := Config{Target: r.target(), Wait: 2 * time.Second, Timeout: 5 * time.Second}
	m := start(t, context.Background(), c)
	ready := m.next(t, echotest.FailAfter)
	if ready["keepalive"] != nil {
		t.Fatalf("keepalive %v, asked for none", ready["keepalive"])
	}
	// grpc-go's own dialer turns TCP keepalive on with the kernel's timers, and sets no user timeout.
	tcp := ready["tcp"].(map[string]any)
	if tcp["keepalive"] != true || tcp["user_timeout_ms"] != 0 {
		t.Fatalf("socket options %v", tcp)
	}
	if text, err := os.ReadFile("/proc/sys/net/ipv4/tcp_keepalive_time"); err == nil {
		if idle, _ := strconv.Atoi(strings.TrimSpace(string(text))); tcp["keepidle_s"] != idle {
			t.Fatalf("TCP keepalive idle %v, the kernel's is %d s", tcp["keepidle_s"], idle)
		}
	}
	r.partition()
	line := m.next(t, c.Wait+echotest.FailAfter)
	if line["event"] != "not_noticed" || line["waited_s"] != 2.0 {
		t.Fatalf("after the partition: %v", line)
	}
	if err := <-m.done; err != nil {
		t.Fatal(err)
	}
}

func TestAServerThatLeavesIsNoticedWithoutKeepalive(t *testing.T) {
	server := echotest.Start(t)
	r := startRelay(t, server.Target)
	m := start(t, context.Background(), Config{Target: r.target(), Wait: time.Minute, Timeout: 5 * time.Second})
	m.next(t, echotest.FailAfter)
	r.close() // a FIN: not silent
	line := m.next(t, echotest.FailAfter)
	if line["event"] != "noticed" || line["code"] != "UNAVAILABLE" {
		t.Fatalf("after the server left: %v", line)
	}
	if err := <-m.done; err != nil {
		t.Fatal(err)
	}
}

func TestProbesInAPartitionFailByTheirDeadline(t *testing.T) {
	server := echotest.Start(t)
	r := startRelay(t, server.Target)
	c := Config{Target: r.target(), Wait: 2 * time.Second, Timeout: 300 * time.Millisecond,
		ProbeEvery: 100 * time.Millisecond}
	m := start(t, context.Background(), c)
	m.next(t, echotest.FailAfter)
	r.partition()
	line := m.next(t, c.Wait+echotest.FailAfter)
	// The calls fail; the connection, and so the held stream, is not declared dead by them.
	if line["event"] != "not_noticed" || line["probes_failed"].(int) < 1 {
		t.Fatalf("after the partition: %v", line)
	}
	if failure := line["first_probe_failure"].(map[string]any); failure["code"] != "DEADLINE_EXCEEDED" {
		t.Fatalf("first failed probe %v", failure)
	}
	if err := <-m.done; err != nil {
		t.Fatal(err)
	}
}

func TestASignalEndsTheWaitAtOnce(t *testing.T) {
	server := echotest.Start(t)
	ready := make(chan struct{})
	err := echotest.CancelWhen(t, ready, func(ctx context.Context) error {
		return Run(ctx, Config{Target: server.Target, Wait: time.Hour, Timeout: 5 * time.Second},
			func(line map[string]any) error {
				if line["event"] == "ready" {
					close(ready)
				}
				return nil
			})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestAServerNeverReachedIsAnErrorAndNoLine(t *testing.T) {
	var lines []map[string]any
	err := Run(context.Background(), Config{Target: echotest.ClosedPort, Wait: time.Second, Timeout: time.Second},
		func(line map[string]any) error { lines = append(lines, line); return nil })
	if err == nil || len(lines) > 0 {
		t.Fatalf("error %v, lines %v", err, lines)
	}
}

func TestAConfigThatCannotRunIsRefused(t *testing.T) {
	for _, c := range []Config{{Wait: time.Second, Timeout: time.Second}, {Target: "h:1", Timeout: time.Second},
		{Target: "h:1", Wait: time.Second}, {Target: "h:1", Wait: time.Second, Timeout: time.Second, ProbeEvery: -1}} {
		if err := c.Check(); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
}
