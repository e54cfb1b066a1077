// Package series is the series agent of labkit/echo/series_agent.py in grpc-go: every probe on one schedule,
// one JSON line per result, the same protocol ("start", "sample", "ping", "end" events) the controller reads.
package series

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"labkit/go/echopb"
	"labkit/go/internal/address"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
	"labkit/go/internal/pyrandom"
	"labkit/go/internal/reason"
	"labkit/go/internal/units"
)

const (
	skipped = "skipped: previous call still in flight"
	leadS   = 0.2 // between the warm-up and the first tick, so every probe is waiting when it comes
)

// Probes are the probes the agent knows, in the order --help lists them.
var Probes = []string{"ping", "echo-warm", "echo-cold", "tcp-echo", "tcp-connect"}

// Config is what `labkit-go series-agent` is told: the flags of `labkit echo series-agent`, durations as written.
type Config struct {
	Address, Probes, Interval, Timeout               string
	GRPCPort, TCPEchoPort, FirstTick, Ticks, Payload int
	Spread, Together                                 bool
	Given                                            map[string]bool // flags set on the command line (a port given as 0 is refused)
}

// Agent is a Config checked: the probes to run and their schedule.
type Agent struct {
	Config
	probes            []string
	interval, timeout time.Duration
	spread            bool
	t0                time.Time
	out               *lineWriter
}

// NewAgent checks c as the Python agent does (its click types and AgentPlan.check), each refusal one line.
func NewAgent(c Config) (*Agent, error) {
	a := &Agent{Config: c, spread: c.Spread && !c.Together}
	for _, probe := range strings.Split(c.Probes, ",") {
		if probe = strings.TrimSpace(probe); probe == "" {
			continue
		}
		if !slices.Contains(Probes, probe) {
			return nil, fmt.Errorf("probes must be some of %s, not %s", strings.Join(Probes, ", "), probe)
		}
		a.probes = append(a.probes, probe)
	}
	if err := a.checkNumbers(); err != nil {
		return nil, err
	}
	switch {
	case len(a.probes) == 0:
		return nil, fmt.Errorf("give --probes")
	case (slices.Contains(a.probes, "echo-warm") || slices.Contains(a.probes, "echo-cold")) && c.GRPCPort == 0:
		return nil, fmt.Errorf("the echo probes need the gRPC port (--grpc-port)")
	case (slices.Contains(a.probes, "tcp-echo") || slices.Contains(a.probes, "tcp-connect")) && c.TCPEchoPort == 0:
		return nil, fmt.Errorf("the tcp probes need the TCP echo port (--tcp-echo-port)")
	case c.Ticks < 1 || c.FirstTick < 0 || c.Ticks > limits.MaxTicks || c.FirstTick > limits.MaxTicks:
		return nil, fmt.Errorf("--ticks must be between 1 and %d and --first-tick between 0 and %d", limits.MaxTicks, limits.MaxTicks)
	}
	return a, nil
}

// checkNumbers holds the numeric flags to the ranges of the Python agent.
func (a *Agent) checkNumbers() error {
	var err error
	if a.interval, err = units.ParseDuration(a.Interval); err != nil || a.interval <= 0 || a.interval > limits.MaxProbeWait {
		return fmt.Errorf("--interval must be a duration between 0 and %.0f s", limits.MaxProbeWait.Seconds())
	}
	if a.timeout, err = units.ParseDuration(a.Timeout); err != nil || a.timeout <= 0 || a.timeout > limits.MaxProbeWait {
		return fmt.Errorf("--timeout must be a duration between 0 and %.0f s", limits.MaxProbeWait.Seconds())
	}
	for _, port := range []struct {
		name  string
		value int
	}{{"grpc-port", a.GRPCPort}, {"tcp-echo-port", a.TCPEchoPort}} {
		if err := address.CheckPort(port.name, port.value, 0); err != nil || (port.value == 0 && a.Given[port.name]) {
			return fmt.Errorf("--%s %d is out of range [1, 65535]", port.name, port.value)
		}
	}
	if a.Payload < 0 || a.Payload > limits.MaxRequestBytes {
		return fmt.Errorf("--payload-bytes %d is out of range [0, %d]", a.Payload, limits.MaxRequestBytes)
	}
	return nil
}

// lineWriter writes protocol lines one at a time, counting samples and pings for the end event.
type lineWriter struct {
	mu             sync.Mutex
	out            io.Writer
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
	w.out.Write(append(line, '\n'))
}

// offset is when probe sends after each tick: spread evenly over the tick, in the order given.
func (a *Agent) offset(probe string) time.Duration {
	if !a.spread {
		return 0
	}
	return time.Duration(slices.Index(a.probes, probe)) * a.interval / time.Duration(len(a.probes))
}

func (a *Agent) due(index int, probe string) time.Time {
	return a.t0.Add(time.Duration(index)*a.interval + a.offset(probe))
}

// wait sleeps until t; false when ctx was cancelled first.
func wait(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// Run opens and warms the probes, then runs every tick, writing the protocol's lines to out. Cancelling ctx
// (a signal) stops every probe at once, a call in flight too, and Run returns ctx's error without the end
// event; a call cut short measured nothing and has no row, as in the Python agent.
func (a *Agent) Run(ctx context.Context, out io.Writer) error {
	a.out = &lineWriter{out: out}
	// Random, so no layer can compress it, and the bytes of the Python agent: random.Random(first_tick).
	payload := make([]byte, a.Payload)
	pyrandom.New(int64(a.FirstTick)).Fill(payload)
	probes, warmup, closers := a.openProbes(ctx, payload)
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
	a.out.emit(map[string]any{"event": "start", "t0_utc_ns": a.t0.UnixNano(), "first_tick": a.FirstTick, "ticks": a.Ticks,
		"interval_s": a.interval.Seconds(), "probes": a.probes, "offsets_s": offsets, "payload_bytes": a.Payload,
		"pid": os.Getpid(), "warmup": warmup})
	var wg sync.WaitGroup
	for name, p := range probes {
		wg.Add(1)
		go func() { defer wg.Done(); a.probeLoop(ctx, name, p) }()
	}
	if slices.Contains(a.probes, "ping") {
		wg.Add(1)
		go func() { defer wg.Done(); a.pingLoop(ctx) }()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	a.out.emit(map[string]any{"event": "end", "samples": a.out.samples, "pings": a.out.pings})
	return nil
}

// result is one timed measurement: rtt < 0 when nothing was sent; started, when its timer started (zero where
// the probe does not know: the loop's own reading is used); server, what the echo server stamped (gRPC and TCP
// echo probes; echo.NoStamps for the others).
type result struct {
	rtt     time.Duration
	ok      bool
	detail  string
	cold    bool
	started time.Time
	server  echo.Stamps
}

type probe func() result

// failed is a probe that sent nothing, and why.
func failed(detail string, cold bool) result {
	return result{rtt: -1, detail: detail, cold: cold, server: echo.NoStamps}
}

func (a *Agent) openProbes(ctx context.Context, payload []byte) (map[string]probe, map[string]string, []func()) {
	probes, warmup, closers := map[string]probe{}, map[string]string{}, []func(){}
	target := net.JoinHostPort(a.Address, strconv.Itoa(a.GRPCPort))
	tcpTarget := net.JoinHostPort(a.Address, strconv.Itoa(a.TCPEchoPort))
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	for _, name := range a.probes {
		switch name {
		case "echo-warm":
			conn, _ := grpc.NewClient(target, dial...)
			stub := echopb.NewEchoServiceClient(conn)
			closers = append(closers, func() { conn.Close() })
			probes[name] = func() result {
				return a.echo(ctx, stub, payload, conn.GetState() != connectivity.Ready)
			}
		case "echo-cold":
			probes[name] = func() result {
				conn, _ := grpc.NewClient(target, dial...) // made outside the window; the call opens its connection
				defer conn.Close()
				return a.echo(ctx, echopb.NewEchoServiceClient(conn), payload, true)
			}
		case "tcp-echo":
			client := &tcpEchoClient{target: tcpTarget, timeout: a.timeout}
			closers = append(closers, client.close)
			probes[name] = func() result { return client.call(payload) }
		case "tcp-connect":
			probes[name] = func() result {
				started := time.Now()
				conn, err := net.DialTimeout("tcp", tcpTarget, a.timeout)
				if err != nil {
					return failed(fmt.Sprintf("connect to %s: %v", tcpTarget, reason.Of(err)), true)
				}
				rtt := time.Since(started)
				conn.Close()
				return result{rtt, true, "", true, started, echo.NoStamps}
			}
		}
		if name == "echo-warm" || name == "tcp-echo" {
			result := probes[name]()
			warmup[name] = map[bool]string{true: "", false: result.detail}[result.ok]
		}
	}
	return probes, warmup, closers
}

func (a *Agent) echo(ctx context.Context, stub echopb.EchoServiceClient, payload []byte, cold bool) result {
	outcome := echo.TimedEcho(ctx, stub, payload, a.timeout)
	detail := outcome.Detail
	if detail != "" && outcome.Code != "OK" && detail != outcome.Code {
		detail = outcome.Code + ": " + detail
	}
	return result{outcome.RTT, detail == "", detail, cold, outcome.Started, outcome.Server}
}

func (a *Agent) probeLoop(ctx context.Context, name string, p probe) {
	payloadBytes := a.Payload
	if name == "tcp-connect" {
		payloadBytes = 0
	}
	for index := 0; index < a.Ticks; {
		if !wait(ctx, a.due(index, name)) {
			return
		}
		sent := time.Now()
		result := p()
		ended := time.Now()
		if ctx.Err() != nil { // a signal cut the call short: it measured nothing (the Python agent writes no row)
			return
		}
		if !result.started.IsZero() { // a gRPC probe's time starts after it set up its channel: its window too
			sent = result.started
		}
		sample := map[string]any{"event": "sample", "probe": name, "tick": a.FirstTick + index, "t_utc_ns": sent.UnixNano(),
			"rtt_ns": nil, "ok": result.ok, "error": result.detail, "cold": result.cold, "payload_bytes": payloadBytes}
		if result.rtt >= 0 {
			sample["rtt_ns"] = result.rtt.Nanoseconds()
		}
		result.server.Row(sample)
		a.out.emit(sample)
		// Ticks that came while the call was in flight are reported, not dropped.
		for index++; index < a.Ticks && a.due(index, name).Before(ended); index++ {
			a.out.emit(map[string]any{"event": "sample", "probe": name, "tick": a.FirstTick + index,
				"t_utc_ns": a.due(index, name).UnixNano(), "rtt_ns": nil, "ok": false, "error": skipped, "cold": false,
				"payload_bytes": payloadBytes})
		}
	}
}
