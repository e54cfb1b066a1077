package call_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"labkit/go/internal/call"
	"labkit/go/internal/echo/echotest"
	"labkit/go/internal/limits"
)

// config is a plan of calls to target with no gap, changed by change.
func config(target string, change func(*call.Config)) call.Config {
	c := call.Config{Target: target, Sizes: "10", Repeats: 1, Gap: "0", Order: "sequential", Timeout: "10s",
		Given: map[string]bool{}}
	if change != nil {
		change(&c)
	}
	return c
}

// run makes the plan's calls and returns its rows, decoded.
func run(t *testing.T, c call.Config) ([]map[string]any, call.Summary) {
	t.Helper()
	plan, err := call.NewPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	summary, err := plan.Run(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	return echotest.JSONLines(t, out.String()), summary
}

func column(rows []map[string]any, name string) []any {
	values := make([]any, len(rows))
	for i, row := range rows {
		values[i] = row[name]
	}
	return values
}

// A shuffled plan with a seed: a row per recorded call (the warm-up has none), numbered from 0, in the order
// Python's call_schedule draws with the same seed (written down from labkit.echo.client.call_schedule), each
// with the fields the Python side reads.
func TestARowPerRecordedCallInTheOrderPythonDraws(t *testing.T) {
	server := echotest.Start(t)
	rows, summary := run(t, config(server.Target, func(c *call.Config) {
		c.Sizes, c.Repeats, c.Warmup, c.Seed, c.Seeded, c.Order = "10,1k,7", 3, 2, 5, true, "shuffled"
	}))
	want := []any{10.0, 1000.0, 10.0, 10.0, 7.0, 7.0, 7.0, 1000.0, 1000.0}
	if got := column(rows, "payload_bytes"); !slices.Equal(got, want) {
		t.Fatalf("payload_bytes %v, want %v", got, want)
	}
	for i, row := range rows {
		keys := slices.Sorted(maps.Keys(row))
		if !slices.Equal(keys, []string{"background", "cold", "grpc_code", "ok", "payload_bytes", "rtt_ns", "seq", "server_ns",
			"server_recv_utc_ns", "server_send_utc_ns", "t_start_utc_ns"}) {
			t.Fatalf("row %d has %v", i, keys)
		}
		if row["seq"] != float64(i) || row["ok"] != true || row["grpc_code"] != "OK" || row["cold"] != false ||
			row["background"] != nil || row["rtt_ns"].(float64) <= 0 || row["server_ns"].(float64) < 0 {
			t.Fatalf("row %d: %v", i, row)
		}
		// One clock on loopback: the server's wall clock at the request and the reply lies within the call's
		// window (JSON numbers are float64: ns since the epoch to within ~256 ns).
		start, end := row["t_start_utc_ns"].(float64), row["t_start_utc_ns"].(float64)+row["rtt_ns"].(float64)
		recv, send := row["server_recv_utc_ns"].(float64), row["server_send_utc_ns"].(float64)
		if !(start-1e3 <= recv && recv <= send && send <= end+1e3) {
			t.Fatalf("row %d: server stamps %.0f, %.0f outside the call [%.0f, %.0f]", i, recv, send, start, end)
		}
	}
	// The two warm-up calls' time: what they took, connecting included, and not a recorded call's.
	warmup := summary.Warmup
	if warmup <= 0 || summary != (call.Summary{RecordedOK: 9, WarmupOK: 2, Warmup: warmup}) || summary.NothingMeasured() {
		t.Fatalf("summary %+v", summary)
	}
	line := fmt.Sprintf("9 recorded calls (0 failed), 2 warmup (0 failed, %.6f s), 0 background (0 failed)", warmup.Seconds())
	if summary.String() != line {
		t.Fatalf("summary line %q", summary)
	}
}

// In order: the warm-up takes the sizes in turn, then each size is repeated before the next.
func TestTheSequentialScheduleRepeatsEachSizeInTurn(t *testing.T) {
	plan, err := call.NewPlan(config(echotest.ClosedPort, func(c *call.Config) { c.Sizes, c.Repeats, c.Warmup = "1,2", 2, 3 }))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for recorded, size := range plan.Schedule() {
		got = append(got, fmt.Sprint(recorded, size))
	}
	want := []string{"false 1", "false 2", "false 1", "true 1", "true 1", "true 2", "true 2"}
	if !slices.Equal(got, want) {
		t.Fatalf("schedule %v, want %v", got, want)
	}
}

// --cold opens a connection per call; pool=2 opens two and then reuses them; --tcp-info adds the
// connection's state around every recorded call.
func TestColdCallsAndAPoolOpenTheirConnectionsAsThePythonClient(t *testing.T) {
	server := echotest.Start(t)
	cold, _ := run(t, config(server.Target, func(c *call.Config) { c.Repeats, c.Cold = 3, true }))
	if got := column(cold, "cold"); !slices.Equal(got, []any{true, true, true}) {
		t.Fatalf("--cold rows: cold %v", got)
	}
	pooled, _ := run(t, config(server.Target, func(c *call.Config) {
		c.Repeats, c.TCPInfo, c.GRPCOptions = 4, true, []string{"pool=2"}
	}))
	if got := column(pooled, "cold"); !slices.Equal(got, []any{true, true, false, false}) {
		t.Fatalf("pool=2 rows: cold %v", got)
	}
	for i, row := range pooled {
		if row["mss"] == nil || row["tcp_cc"] == nil || row["rto_ms_after"] == nil {
			t.Fatalf("--tcp-info row %d has no TCP state: %v", i, row)
		}
		if _, ok := row["srtt_ms_before"]; !ok {
			t.Fatalf("--tcp-info row %d has no column for the state before: %v", i, row)
		}
	}
	background, _ := run(t, config(server.Target, func(c *call.Config) { c.BackgroundGap = "250ms" }))
	if background[0]["background"] != 0.25 {
		t.Fatalf("--background-gap 250ms: row says %v", background[0]["background"])
	}
}

// Nothing listens: every call is a row with the reason, and the summary says nothing was measured (exit 1).
func TestAClosedPortGivesAnErrorRowPerCall(t *testing.T) {
	rows, summary := run(t, config(echotest.ClosedPort, func(c *call.Config) { c.Sizes, c.Repeats = "10,20", 2 }))
	if got := column(rows, "seq"); !slices.Equal(got, []any{0.0, 1.0, 2.0, 3.0}) {
		t.Fatalf("seq %v", got)
	}
	for i, row := range rows {
		if row["ok"] != false || row["grpc_code"] != "UNAVAILABLE" || row["server_ns"] != nil ||
			!strings.Contains(row["error"].(string), "connect: connection refused") {
			t.Fatalf("row %d: %v", i, row)
		}
	}
	if !summary.NothingMeasured() || summary.String() != "4 recorded calls (4 failed), 0 warmup (0 failed, 0.000000 s), 0 background (0 failed)" {
		t.Fatalf("summary %q", summary)
	}
}

// runUntilCancelled starts the plan, cancels it once ready says so, and returns what Run returned.
func runUntilCancelled(t *testing.T, c call.Config, out io.Writer, ready <-chan struct{}) (call.Summary, error) {
	t.Helper()
	plan, err := call.NewPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	var summary call.Summary
	err = echotest.CancelWhen(t, ready, func(ctx context.Context) (err error) {
		summary, err = plan.Run(ctx, out)
		return err
	})
	return summary, err
}

// A signal (the context cancelled) while a call waits on a server that never answers, with an hour's deadline:
// the run stops now, and the cut call has no row.
func TestCancellingStopsACallInFlight(t *testing.T) {
	target, callArrived := echotest.Silent(t)
	var out bytes.Buffer
	summary, err := runUntilCancelled(t, config(target, func(c *call.Config) { c.Timeout, c.Repeats = "1h", 5 }), &out, callArrived)
	if !errors.Is(err, context.Canceled) || out.Len() != 0 || summary != (call.Summary{}) {
		t.Fatalf("%v, %+v, rows %q", err, summary, out.String())
	}
}

// rowSignal is stdout that says when a row was written.
type rowSignal struct {
	bytes.Buffer
	written chan struct{}
}

func (w *rowSignal) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	w.written <- struct{}{}
	return n, err
}

// A signal during an hour's gap between calls stops the run at once, with the calls made counted.
func TestCancellingStopsTheGap(t *testing.T) {
	server := echotest.Start(t)
	out := &rowSignal{written: make(chan struct{}, 1)}
	summary, err := runUntilCancelled(t, config(server.Target, func(c *call.Config) { c.Gap, c.Repeats = "1h", 3 }), out, out.written)
	if !errors.Is(err, context.Canceled) || summary != (call.Summary{RecordedOK: 1}) || len(echotest.JSONLines(t, out.String())) != 1 {
		t.Fatalf("%v, %+v, rows %q", err, summary, out.String())
	}
}

// Every bound is refused in one line naming its flag, before anything is dialled.
func TestTheBoundsAreRefused(t *testing.T) {
	above := fmt.Sprintf("%ds", int64(limits.MaxDuration/time.Second)+1)
	for _, tc := range []struct {
		change func(*call.Config)
		says   string
	}{
		{func(c *call.Config) { c.Target = "" }, "--target HOST:PORT is required"},
		{func(c *call.Config) { c.Target = "127.0.0.1:0" }, "--target: port 0"},
		{func(c *call.Config) { c.Sizes = fmt.Sprint(limits.MaxRequestBytes + 1) }, "--sizes"},
		{func(c *call.Config) { c.Repeats = limits.MaxRepeats + 1 }, "--repeats must be between 1 and 1000000"},
		{func(c *call.Config) { c.Repeats = 0 }, "--repeats must be between 1"},
		{func(c *call.Config) { c.Warmup = limits.MaxWarmup + 1 }, "--warmup between 0 and 10000"},
		{func(c *call.Config) { c.Sizes, c.Repeats = "1,2,3,4,5,6,7,8,9,10,11", limits.MaxRepeats }, "11 sizes × 1000000 repeats is more than 10000000 calls"},
		{func(c *call.Config) { c.KeepaliveMs = limits.MaxKeepaliveMs + 1 }, "--keepalive-ms must be between 1 and 3600000"},
		{func(c *call.Config) { c.Given["keepalive-ms"] = true }, "--keepalive-ms must be between 1"},
		{func(c *call.Config) { c.Order = "random" }, `--order is sequential or shuffled, not "random"`},
		{func(c *call.Config) { c.Gap = above }, "--gap: \"" + above + "\" is longer than 168h"},
		{func(c *call.Config) { c.Timeout = above }, "--timeout: \"" + above + "\" is longer than 168h"},
		{func(c *call.Config) { c.BackgroundGap = above }, "--background-gap: \"" + above + "\" is longer than 168h"},
		{func(c *call.Config) { c.BackgroundGap = "0" }, "--background-gap must be a positive duration"},
		{func(c *call.Config) { c.BackgroundGap, c.Cold = "1s", true }, "cannot be combined with --cold"},
		{func(c *call.Config) { c.TLSServerName = "x" }, "--tls-server-name needs --tls-ca"},
		{func(c *call.Config) { c.GRPCOptions = []string{"max-connection-idle=1s"} }, "is a server option, not a client one"},
		{func(c *call.Config) { c.TLSCA = "/dev/zero" }, "--tls-ca /dev/zero is not a regular file"},
	} {
		c := config(echotest.ClosedPort, tc.change)
		_, err := call.NewPlan(c)
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c, err, tc.says)
		}
	}
}
