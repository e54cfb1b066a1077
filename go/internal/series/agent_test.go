package series_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"labkit/go/internal/echo/echotest"
	"labkit/go/internal/limits"
	"labkit/go/internal/series"
)

func config(change func(*series.Config)) series.Config {
	c := series.Config{Address: "127.0.0.1", Interval: "50ms", Timeout: "5s", Ticks: 3, Payload: 50, Spread: true,
		Given: map[string]bool{}}
	change(&c)
	return c
}

// events runs the agent to its end and returns its lines, decoded, and the lines of each event kind.
func events(t *testing.T, c series.Config) (all []map[string]any, byEvent map[string][]map[string]any) {
	t.Helper()
	agent, err := series.NewAgent(c)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := agent.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return decode(t, out.String())
}

func decode(t *testing.T, text string) (all []map[string]any, byEvent map[string][]map[string]any) {
	t.Helper()
	all, byEvent = echotest.JSONLines(t, text), map[string][]map[string]any{}
	for _, event := range all {
		byEvent[event["event"].(string)] = append(byEvent[event["event"].(string)], event)
	}
	return all, byEvent
}

// ticksOf are the ticks probe reported, in the order it reported them.
func ticksOf(samples []map[string]any, probe string) []any {
	var ticks []any
	for _, sample := range samples {
		if sample["probe"] == probe {
			ticks = append(ticks, sample["tick"])
		}
	}
	return ticks
}

// Every probe against the real echo server: the start event says the schedule (the probes spread evenly over a
// tick), each probe reports every tick from --first-tick on, ping hands over its raw output, and the end event
// counts what came.
func TestEveryProbeReportsEveryTickBetweenStartAndEnd(t *testing.T) {
	server := echotest.Start(t)
	probes := []string{"echo-warm", "echo-cold", "tcp-echo", "tcp-connect", "ping"}
	all, byEvent := events(t, config(func(c *series.Config) {
		c.Probes, c.GRPCPort, c.TCPEchoPort, c.FirstTick, c.Payload = strings.Join(probes, ","), server.Port, server.TCPEchoPort, 7, 20
	}))
	start := all[0]
	if start["event"] != "start" || start["first_tick"] != 7.0 || start["ticks"] != 3.0 || start["interval_s"] != 0.05 ||
		start["payload_bytes"] != 20.0 || fmt.Sprint(start["probes"]) != fmt.Sprint(probes) {
		t.Fatalf("start event %v", start)
	}
	offsets := start["offsets_s"].(map[string]any)
	for i, probe := range probes {
		if offsets[probe] != (time.Duration(i) * 50 * time.Millisecond / 5).Seconds() {
			t.Fatalf("offsets_s %v: %s is not %d/5 of the interval", offsets, probe, i)
		}
	}
	if warmup := start["warmup"].(map[string]any); len(warmup) != 2 || warmup["echo-warm"] != "" || warmup["tcp-echo"] != "" {
		t.Fatalf("warmup %v", warmup)
	}
	samples := byEvent["sample"]
	for _, probe := range probes[:4] {
		if ticks := ticksOf(samples, probe); !slices.Equal(ticks, []any{7.0, 8.0, 9.0}) {
			t.Fatalf("%s reported ticks %v", probe, ticks)
		}
	}
	for _, sample := range samples {
		if sample["error"] == "skipped: previous call still in flight" {
			continue // a tick that came while this loaded machine was still on the previous call
		}
		wantBytes := map[bool]float64{true: 0, false: 20}[sample["probe"] == "tcp-connect"]
		wantCold := sample["probe"] == "echo-cold" || sample["probe"] == "tcp-connect"
		grpc := strings.HasPrefix(sample["probe"].(string), "echo-")
		if sample["ok"] != true || sample["error"] != "" || sample["rtt_ns"].(float64) <= 0 || sample["cold"] != wantCold ||
			sample["payload_bytes"] != wantBytes || (sample["server_ns"] != nil) != grpc {
			t.Fatalf("sample %v", sample)
		}
	}
	pings := byEvent["ping"]
	if len(pings) != 3 || pings[0]["argv"].([]any)[0] != "ping" || !slices.Contains(pings[0]["argv"].([]any), any("127.0.0.1")) {
		t.Fatalf("ping events %v", pings)
	}
	end := all[len(all)-1]
	if end["event"] != "end" || end["samples"] != float64(len(samples)) || end["pings"] != 3.0 || len(samples) != 12 {
		t.Fatalf("end event %v after %d samples", end, len(samples))
	}
	_, together := events(t, config(func(c *series.Config) {
		c.Probes, c.TCPEchoPort, c.Ticks, c.Together = "tcp-echo,tcp-connect", server.TCPEchoPort, 1, true
	}))
	if offsets := together["start"][0]["offsets_s"].(map[string]any); offsets["tcp-echo"] != 0.0 || offsets["tcp-connect"] != 0.0 {
		t.Fatalf("--together offsets %v", offsets)
	}
}

// Nothing listens: each probe still reports each tick, with the reason and no time; the warm-up says it failed.
func TestClosedPortsGiveARowWithTheReasonPerTick(t *testing.T) {
	_, byEvent := events(t, config(func(c *series.Config) {
		c.Probes, c.GRPCPort, c.TCPEchoPort, c.Ticks = "echo-cold,tcp-echo,tcp-connect", 1, 1, 2
	}))
	refused := map[string]string{
		"tcp-echo":    "connect to 127.0.0.1:1: connect: connection refused",
		"tcp-connect": "connect to 127.0.0.1:1: connect: connection refused",
		"echo-cold":   `UNAVAILABLE: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`,
	}
	if warmup := byEvent["start"][0]["warmup"].(map[string]any); warmup["tcp-echo"] != refused["tcp-echo"] {
		t.Fatalf("warmup %v", warmup)
	}
	for probe := range refused {
		if ticks := ticksOf(byEvent["sample"], probe); !slices.Equal(ticks, []any{0.0, 1.0}) {
			t.Fatalf("%s reported ticks %v", probe, ticks)
		}
	}
	for _, sample := range byEvent["sample"] {
		if sample["ok"] != false || sample["error"] != refused[sample["probe"].(string)] ||
			(sample["rtt_ns"] == nil) != strings.HasPrefix(sample["probe"].(string), "tcp-") {
			t.Fatalf("sample %v", sample)
		}
	}
}

// A call that outlasts the ticks after it (a silent server, a 300 ms deadline, a 100 ms interval): the ticks due
// while it was in flight are reported as skipped, not dropped.
func TestTicksDueDuringALongCallAreReportedSkipped(t *testing.T) {
	target, _ := echotest.Silent(t)
	port := strings.TrimPrefix(target, "127.0.0.1:")
	_, byEvent := events(t, config(func(c *series.Config) {
		c.Probes, c.Interval, c.Timeout, c.Ticks = "echo-warm", "100ms", "300ms", 3
		fmt.Sscan(port, &c.GRPCPort)
	}))
	samples := byEvent["sample"]
	if ticks := ticksOf(samples, "echo-warm"); !slices.Equal(ticks, []any{0.0, 1.0, 2.0}) {
		t.Fatalf("ticks %v", ticks)
	}
	if !strings.HasPrefix(samples[0]["error"].(string), "DEADLINE_EXCEEDED") {
		t.Fatalf("the first call: %v", samples[0])
	}
	for _, sample := range samples[1:] {
		if sample["error"] != "skipped: previous call still in flight" || sample["ok"] != false || sample["rtt_ns"] != nil {
			t.Fatalf("a tick due during the call: %v", sample)
		}
	}
}

// syncBuffer is the agent's stdout, read by the test while the agent writes.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.Buffer.String() }

// A signal (the context cancelled) while the cold echo probe waits an hour on a server that never answers: the
// agent stops now, with no row for the cut call and no end event.
func TestCancellingStopsTheAgentWhileACallWaits(t *testing.T) {
	target, callArrived := echotest.Silent(t)
	c := config(func(c *series.Config) {
		c.Probes, c.Interval, c.Timeout, c.Ticks = "echo-cold", "1s", "1h", 1000
		fmt.Sscan(strings.TrimPrefix(target, "127.0.0.1:"), &c.GRPCPort)
	})
	agent, err := series.NewAgent(c)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	err = echotest.CancelWhen(t, callArrived, func(ctx context.Context) error { return agent.Run(ctx, &out) })
	all, _ := decode(t, out.String())
	if !errors.Is(err, context.Canceled) || len(all) != 1 || all[0]["event"] != "start" {
		t.Fatalf("%v; lines %v", err, all)
	}
}

// What the Python agent refuses, in one line each.
func TestTheBoundsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		change func(*series.Config)
		says   string
	}{
		{func(c *series.Config) { c.Probes = "ping,icmp" }, "probes must be some of ping, echo-warm, echo-cold, tcp-echo, tcp-connect, not icmp"},
		{func(c *series.Config) { c.Probes = " , " }, "give --probes"},
		{func(c *series.Config) { c.Probes = "echo-warm" }, "the echo probes need the gRPC port (--grpc-port)"},
		{func(c *series.Config) { c.Probes = "tcp-connect" }, "the tcp probes need the TCP echo port (--tcp-echo-port)"},
		{func(c *series.Config) { c.Ticks = limits.MaxTicks + 1 }, "--ticks must be between 1 and 10000000"},
		{func(c *series.Config) { c.Ticks = 0 }, "--ticks must be between 1"},
		{func(c *series.Config) { c.FirstTick = -1 }, "--first-tick between 0 and 10000000"},
		{func(c *series.Config) { c.Interval = "3601s" }, "--interval must be a duration between 0 and 3600 s"},
		{func(c *series.Config) { c.Interval = "0" }, "--interval must be a duration between 0 and 3600 s"},
		{func(c *series.Config) { c.Timeout = "2h" }, "--timeout must be a duration between 0 and 3600 s"},
		{func(c *series.Config) { c.Given["grpc-port"] = true }, "--grpc-port 0 is out of range [1, 65535]"},
		{func(c *series.Config) { c.TCPEchoPort = 65536 }, "--tcp-echo-port 65536 is out of range [1, 65535]"},
		{func(c *series.Config) { c.Payload = limits.MaxRequestBytes + 1 }, "--payload-bytes 1073741825 is out of range [0, 1073741824]"},
	} {
		c := config(func(c *series.Config) { c.Probes = "ping" })
		tc.change(&c)
		_, err := series.NewAgent(c)
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c, err, tc.says)
		}
	}
}
