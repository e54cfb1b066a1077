package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
	"labkit/go/internal/pyrandom"
	"labkit/go/internal/reason"
	"labkit/go/internal/units"
)

// The series agent of labkit/echo/series_agent.py in grpc-go: every probe on one schedule, one JSON
// line per result, the same protocol ("start", "sample", "ping", "end" events) the controller reads.
const (
	skipped = "skipped: previous call still in flight"
	leadS   = 0.2 // between the warm-up and the first tick, so every probe is waiting when it comes
)

var seriesProbes = []string{"ping", "echo-warm", "echo-cold", "tcp-echo", "tcp-connect"}

type seriesAgent struct {
	address, probesText, intervalText, timeoutText string
	grpcPort, tcpEchoPort, firstTick, ticks        int
	payloadBytes                                   int
	spread, together                               bool
	probes                                         []string
	interval, timeout                              time.Duration
	out                                            *lineWriter
	t0                                             time.Time
	stop                                           chan struct{}
	calls                                          context.Context // cancelled with stop: a gRPC call in flight ends at once
	cancelCalls                                    context.CancelFunc
	given                                          map[string]bool // flags set on the command line
}

// lineWriter writes protocol lines one at a time, counting samples and pings for the end event.
type lineWriter struct {
	mu             sync.Mutex
	samples, pings int
}

func (w *lineWriter) emit(event map[string]any) {
	line, _ := json.Marshal(event)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch event["event"] {
	case "sample":
		w.samples++
	case "ping":
		w.pings++
	}
	os.Stdout.Write(append(line, '\n'))
}

func seriesAgentCommand(flags *flag.FlagSet, args []string) error {
	a := &seriesAgent{out: &lineWriter{}, stop: make(chan struct{})}
	a.calls, a.cancelCalls = context.WithCancel(context.Background())
	flags.StringVar(&a.address, "address", "", "the server's data address (ping, gRPC and TCP echo go there)")
	flags.IntVar(&a.grpcPort, "grpc-port", 0, "port of the gRPC echo service")
	flags.IntVar(&a.tcpEchoPort, "tcp-echo-port", 0, "port of the raw TCP echo")
	flags.StringVar(&a.probesText, "probes", "", "comma-separated: "+strings.Join(seriesProbes, ","))
	flags.IntVar(&a.firstTick, "first-tick", 0, fmt.Sprintf("number of the first tick (at most %d)", limits.MaxTicks))
	flags.IntVar(&a.ticks, "ticks", 0, fmt.Sprintf("how many ticks to run (at most %d)", limits.MaxTicks))
	flags.StringVar(&a.intervalText, "interval", "", "time between ticks")
	flags.IntVar(&a.payloadBytes, "payload-bytes", 50, "payload of the echo probes")
	flags.StringVar(&a.timeoutText, "timeout", "5s", "deadline of each call and ping")
	flags.BoolVar(&a.spread, "spread", true, "spread the probes evenly over each tick")
	flags.BoolVar(&a.together, "together", false, "send every probe at the tick itself")
	if err := parse(flags, args); err != nil {
		return err
	}
	a.given = givenFlags(flags)
	if err := a.check(); err != nil {
		return err
	}
	return a.run()
}

func (a *seriesAgent) check() error {
	a.spread = a.spread && !a.together
	for _, probe := range strings.Split(a.probesText, ",") {
		if probe = strings.TrimSpace(probe); probe == "" {
			continue
		}
		if !contains(seriesProbes, probe) {
			return fmt.Errorf("probes must be some of %s, not %s", strings.Join(seriesProbes, ", "), probe)
		}
		a.probes = append(a.probes, probe)
	}
	if err := a.checkNumbers(); err != nil {
		return err
	}
	switch {
	case len(a.probes) == 0:
		return fmt.Errorf("give --probes")
	case (contains(a.probes, "echo-warm") || contains(a.probes, "echo-cold")) && a.grpcPort == 0:
		return fmt.Errorf("the echo probes need the gRPC port (--grpc-port)")
	case (contains(a.probes, "tcp-echo") || contains(a.probes, "tcp-connect")) && a.tcpEchoPort == 0:
		return fmt.Errorf("the tcp probes need the TCP echo port (--tcp-echo-port)")
	case a.ticks < 1 || a.firstTick < 0 || a.ticks > limits.MaxTicks || a.firstTick > limits.MaxTicks:
		return fmt.Errorf("--ticks must be between 1 and %d and --first-tick between 0 and %d", limits.MaxTicks, limits.MaxTicks)
	}
	return nil
}

// checkNumbers holds the numeric flags to the ranges of the Python agent (its click types and AgentPlan.check).
func (a *seriesAgent) checkNumbers() error {
	var err error
	if a.interval, err = units.ParseDuration(a.intervalText); err != nil || a.interval <= 0 || a.interval > time.Hour {
		return fmt.Errorf("--interval must be a duration between 0 and 3600 s")
	}
	if a.timeout, err = units.ParseDuration(a.timeoutText); err != nil || a.timeout <= 0 || a.timeout > time.Hour {
		return fmt.Errorf("--timeout must be a duration between 0 and 3600 s")
	}
	for name, port := range map[string]int{"grpc-port": a.grpcPort, "tcp-echo-port": a.tcpEchoPort} {
		if port < 0 || port > 65535 || (port == 0 && a.given[name]) {
			return fmt.Errorf("--%s %d is out of range [1, 65535]", name, port)
		}
	}
	if a.payloadBytes < 0 || a.payloadBytes > limits.MaxRequestBytes {
		return fmt.Errorf("--payload-bytes %d is out of range [0, %d]", a.payloadBytes, limits.MaxRequestBytes)
	}
	return nil
}

func contains(items []string, item string) bool {
	for _, candidate := range items {
		if candidate == item {
			return true
		}
	}
	return false
}

// offset is when probe sends after each tick: spread evenly over the tick, in the order given.
func (a *seriesAgent) offset(probe string) time.Duration {
	if !a.spread {
		return 0
	}
	for i, p := range a.probes {
		if p == probe {
			return time.Duration(i) * a.interval / time.Duration(len(a.probes))
		}
	}
	return 0
}

func (a *seriesAgent) due(index int, probe string) time.Time {
	return a.t0.Add(time.Duration(index)*a.interval + a.offset(probe))
}

// wait sleeps until t; false when asked to stop first.
func (a *seriesAgent) wait(t time.Time) bool {
	select {
	case <-a.stop:
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// probeResult is one timed measurement: rtt < 0 when nothing was sent; serverNs < 0 when the server sent no time
// (every probe but the gRPC ones).
type probeResult struct {
	rtt      time.Duration
	ok       bool
	detail   string
	cold     bool
	serverNs int64
}

type probe func() probeResult

// failed is a probe that sent nothing, and why.
func failed(detail string, cold bool) probeResult { return probeResult{-1, false, detail, cold, -1} }

func (a *seriesAgent) run() error {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	// Random, so no layer can compress it, and the bytes of the Python agent: random.Random(first_tick).
	payload := make([]byte, a.payloadBytes)
	pyrandom.New(int64(a.firstTick)).Fill(payload)
	probes, warmup, closers := a.openProbes(payload)
	defer func() {
		for _, close := range closers {
			close()
		}
	}()
	a.t0 = time.Now().Add(time.Duration(leadS * float64(time.Second)))
	offsets := map[string]float64{}
	for _, p := range a.probes {
		offsets[p] = a.offset(p).Seconds()
	}
	a.out.emit(map[string]any{"event": "start", "t0_utc_ns": a.t0.UnixNano(), "first_tick": a.firstTick, "ticks": a.ticks,
		"interval_s": a.interval.Seconds(), "probes": a.probes, "offsets_s": offsets, "payload_bytes": a.payloadBytes,
		"pid": os.Getpid(), "warmup": warmup})
	var wg sync.WaitGroup
	for name, p := range probes {
		wg.Add(1)
		go func() { defer wg.Done(); a.probeLoop(name, p) }()
	}
	if contains(a.probes, "ping") {
		wg.Add(1)
		go func() { defer wg.Done(); a.pingLoop() }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		a.out.emit(map[string]any{"event": "end", "samples": a.out.samples, "pings": a.out.pings})
		return nil
	case <-signals:
		close(a.stop)
		a.cancelCalls()
		<-done
		os.Exit(143)
	}
	return nil
}

func (a *seriesAgent) openProbes(payload []byte) (map[string]probe, map[string]string, []func()) {
	probes, warmup, closers := map[string]probe{}, map[string]string{}, []func(){}
	target := net.JoinHostPort(a.address, strconv.Itoa(a.grpcPort))
	tcpTarget := net.JoinHostPort(a.address, strconv.Itoa(a.tcpEchoPort))
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	for _, name := range a.probes {
		switch name {
		case "echo-warm":
			conn, _ := grpc.NewClient(target, dial...)
			stub := echopb.NewEchoServiceClient(conn)
			closers = append(closers, func() { conn.Close() })
			probes[name] = func() probeResult {
				return a.echo(stub, payload, conn.GetState() != connectivity.Ready)
			}
		case "echo-cold":
			probes[name] = func() probeResult {
				conn, _ := grpc.NewClient(target, dial...) // made outside the window; the call opens its connection
				defer conn.Close()
				return a.echo(echopb.NewEchoServiceClient(conn), payload, true)
			}
		case "tcp-echo":
			client := &tcpEchoClient{target: tcpTarget, timeout: a.timeout}
			closers = append(closers, client.close)
			probes[name] = func() probeResult { return client.call(payload) }
		case "tcp-connect":
			probes[name] = func() probeResult {
				started := time.Now()
				conn, err := net.DialTimeout("tcp", tcpTarget, a.timeout)
				if err != nil {
					return failed(fmt.Sprintf("connect to %s: %v", tcpTarget, reason.Of(err)), true)
				}
				rtt := time.Since(started)
				conn.Close()
				return probeResult{rtt, true, "", true, -1}
			}
		}
		if name == "echo-warm" || name == "tcp-echo" {
			result := probes[name]()
			warmup[name] = map[bool]string{true: "", false: result.detail}[result.ok]
		}
	}
	return probes, warmup, closers
}

func (a *seriesAgent) echo(stub echopb.EchoServiceClient, payload []byte, cold bool) probeResult {
	outcome := echo.TimedEcho(a.calls, stub, payload, a.timeout)
	detail := outcome.Detail
	if detail != "" && outcome.Code != "OK" && detail != outcome.Code {
		detail = outcome.Code + ": " + detail
	}
	return probeResult{outcome.RTT, detail == "", detail, cold, outcome.ServerNs}
}

func (a *seriesAgent) probeLoop(name string, p probe) {
	payloadBytes := a.payloadBytes
	if name == "tcp-connect" {
		payloadBytes = 0
	}
	for index := 0; index < a.ticks; {
		if !a.wait(a.due(index, name)) {
			return
		}
		sent := time.Now()
		result := p()
		ended := time.Now()
		if a.calls.Err() != nil { // a signal cut the call short: it measured nothing (the Python agent writes no row)
			return
		}
		sample := map[string]any{"event": "sample", "probe": name, "tick": a.firstTick + index, "t_utc_ns": sent.UnixNano(),
			"rtt_ns": nil, "ok": result.ok, "error": result.detail, "cold": result.cold, "payload_bytes": payloadBytes,
			"server_ns": nil}
		if result.rtt >= 0 {
			sample["rtt_ns"] = result.rtt.Nanoseconds()
		}
		if result.serverNs >= 0 {
			sample["server_ns"] = result.serverNs
		}
		a.out.emit(sample)
		// Ticks that came while the call was in flight are reported, not dropped.
		for index++; index < a.ticks && a.due(index, name).Before(ended); index++ {
			a.out.emit(map[string]any{"event": "sample", "probe": name, "tick": a.firstTick + index,
				"t_utc_ns": a.due(index, name).UnixNano(), "rtt_ns": nil, "ok": false, "error": skipped, "cold": false,
				"payload_bytes": payloadBytes})
		}
	}
}

// pingLoop runs one `ping -c 1` per tick (iputils' -i is a minimum, not a period) and reports its raw output.
func (a *seriesAgent) pingLoop() {
	argv := []string{"ping", "-D", "-n", "-c", "1", "-W", strconv.Itoa(int(math.Max(1, math.Ceil(a.timeout.Seconds())))), a.address}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // after every ping run has ended (deferred calls run last first)
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		select {
		case <-a.stop: // a signal: kill the runs still waiting for a reply
			cancel()
		case <-ctx.Done():
		}
	}()
	for index := 0; index < a.ticks; index++ {
		if !a.wait(a.due(index, "ping")) {
			return
		}
		tick, started := a.firstTick+index, time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), "LC_ALL=C") // "time=0,045" in some locales
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			status := 0
			if err := cmd.Run(); err != nil {
				status = 127
				if exit, ok := err.(*exec.ExitError); ok {
					status = exit.ExitCode()
				} else {
					stderr.WriteString("cannot run ping: " + err.Error())
				}
			}
			a.out.emit(map[string]any{"event": "ping", "tick": tick, "t_utc_ns": started.UnixNano(), "argv": argv,
				"status": status, "stdout": stdout.String(), "stderr": stderr.String()})
		}()
	}
}

// tcpEchoClient times the raw TCP echo on one open connection; a lost one is re-opened outside the window.
type tcpEchoClient struct {
	target  string
	timeout time.Duration
	conn    net.Conn
}

func (c *tcpEchoClient) call(payload []byte) probeResult {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.target, c.timeout)
		if err != nil {
			return failed(fmt.Sprintf("connect to %s: %v", c.target, reason.Of(err)), false)
		}
		conn.(*net.TCPConn).SetNoDelay(true)
		c.conn = conn
	}
	request := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(request, uint32(len(payload)))
	copy(request[4:], payload)
	reply := make([]byte, 4)
	_ = c.conn.SetDeadline(time.Now().Add(c.timeout))
	started := time.Now()
	_, err := c.conn.Write(request)
	if err == nil {
		_, err = io.ReadFull(c.conn, reply)
	}
	rtt := time.Since(started)
	if err != nil {
		c.close()
		return failed(reason.Of(err).Error(), false)
	}
	if n := binary.BigEndian.Uint32(reply); int(n) != len(payload) {
		c.close() // as Python's TcpEchoClient: a connection out of step is not reused, the call has no time
		return failed(fmt.Sprintf("server reported %d bytes, sent %d", n, len(payload)), false)
	}
	return probeResult{rtt, true, "", false, -1}
}

func (c *tcpEchoClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}
