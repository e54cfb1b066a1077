package grpcload

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"labkit/go/internal/echo/echotest"
)

// load runs c against target and returns its rows by column name.
func load(t *testing.T, ctx context.Context, c Config) (Summary, []map[string]string, error) {
	t.Helper()
	var out bytes.Buffer
	summary, err := Run(ctx, c, &out)
	records, parseErr := csv.NewReader(&out).ReadAll()
	if parseErr != nil {
		t.Fatalf("the CSV does not parse: %v\n%s", parseErr, out.String())
	}
	if len(records) == 0 || strings.Join(records[0], ",") != strings.Join(Columns, ",") {
		t.Fatalf("header %v, want %v", records, Columns)
	}
	var rows []map[string]string
	for _, record := range records[1:] {
		row := map[string]string{}
		for i, name := range Columns {
			row[name] = record[i]
		}
		rows = append(rows, row)
	}
	return summary, rows, err
}

func number(t *testing.T, row map[string]string, column string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(row[column], 10, 64)
	if err != nil {
		t.Fatalf("%s=%q in %v", column, row[column], row)
	}
	return n
}

func TestUnaryCallsAreOneAnsweredMessageEach(t *testing.T) {
	server := echotest.Start(t)
	c := Config{Target: server.Target, RPC: "unary", Concurrency: 4, Connections: 2, StreamMessages: 1,
		Payload: bytes.Repeat([]byte{7}, 100), Duration: 200 * time.Millisecond, Timeout: 5 * time.Second}
	summary, rows, err := load(t, context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if summary.Calls == 0 || summary.Calls != len(rows) || summary.OK != len(rows) {
		t.Fatalf("summary %v for %d rows", summary, len(rows))
	}
	connections := map[string]bool{}
	for _, row := range rows {
		worker := number(t, row, "worker")
		if number(t, row, "connection") != worker%2 || row["message"] != "0" || row["code"] != "OK" || row["error"] != "" {
			t.Fatalf("row %v", row)
		}
		if row["t_ns"] != row["call_t_ns"] {
			t.Fatalf("a unary call's one request is sent as the call starts: %v", row)
		}
		latency := number(t, row, "latency_ns")
		if latency <= 0 || latency > number(t, row, "call_latency_ns") {
			t.Fatalf("latency %d outside (0, call latency]: %v", latency, row)
		}
		if number(t, row, "intended_latency_ns") < latency {
			t.Fatalf("a unary call's request is meant to leave when the worker's call before ended, not after: %v", row)
		}
		if row["call"] == "0" && row["intended_latency_ns"] != row["latency_ns"] {
			t.Fatalf("a worker's first call is meant to leave as it starts, and does: %v", row)
		}
		connections[row["connection"]] = true
	}
	if len(connections) != 2 {
		t.Fatalf("calls went over connections %v, want 0 and 1", connections)
	}
}

func TestAStreamTimesEachMessageFromItsOwnSend(t *testing.T) {
	server := echotest.Start(t)
	const messages = 5
	c := Config{Target: server.Target, RPC: "stream", Concurrency: 3, Connections: 1, StreamMessages: messages,
		Payload: bytes.Repeat([]byte{1}, 32<<10), Duration: 200 * time.Millisecond, Timeout: 5 * time.Second}
	summary, rows, err := load(t, context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if summary.Calls == 0 || len(rows) != summary.Calls*messages || summary.OK != len(rows) {
		t.Fatalf("summary %v for %d rows", summary, len(rows))
	}
	// The rows of calls in flight at once interleave: each call's rows by its worker and number.
	calls := map[string][]map[string]string{}
	var order []string
	for _, row := range rows {
		key := row["worker"] + "/" + row["call"]
		if calls[key] == nil {
			order = append(order, key)
		}
		calls[key] = append(calls[key], row)
	}
	// When each call was meant to begin: its worker's call before ended then (its first: as it began).
	intendedStart := map[string]int64{}
	for _, key := range order {
		call := calls[key]
		worker, callNumber := call[0]["worker"], number(t, call[0], "call")
		if previous, ok := calls[worker+"/"+strconv.FormatInt(callNumber-1, 10)]; ok {
			last := previous[len(previous)-1]
			intendedStart[key] = number(t, last, "call_t_ns") + number(t, last, "call_latency_ns")
		} else {
			intendedStart[key] = number(t, call[0], "call_t_ns")
		}
	}
	for _, key := range order {
		call := calls[key]
		if len(call) != messages {
			t.Fatalf("call %s has %d rows", key, len(call))
		}
		// Answers are written as they arrive; the call's latency and status come with its last row.
		for _, row := range call[:messages-1] {
			if row["call_latency_ns"] != "" || row["code"] != "" {
				t.Fatalf("a row written before its call ended has the call's end: %v", row)
			}
		}
		if call[messages-1]["code"] != "OK" {
			t.Fatalf("last row %v", call[messages-1])
		}
		callStart, callLatency := number(t, call[0], "call_t_ns"), number(t, call[messages-1], "call_latency_ns")
		previousSend := callStart
		for i, row := range call {
			if row["message"] != strconv.Itoa(i) || row["call"] != call[0]["call"] || row["worker"] != call[0]["worker"] {
				t.Fatalf("message %d of a call is %v", i, row)
			}
			sent, latency := number(t, row, "t_ns"), number(t, row, "latency_ns")
			if sent < previousSend || latency <= 0 {
				t.Fatalf("message %d sent at %d after %d, latency %d", i, sent, previousSend, latency)
			}
			// Each answer came after its own request left and before the call ended.
			if sent+latency > callStart+callLatency {
				t.Fatalf("message %d answered at %d, after its call ended at %d", i, sent+latency, callStart+callLatency)
			}
			// From when the loop meant to send it, the end of the worker's call before (or its first call's
			// start): the wait before it left included, so never shorter than from its own send.
			intended := intendedStart[key]
			if got := number(t, row, "intended_latency_ns"); got != sent+latency-intended || got < latency {
				t.Fatalf("message %d: intended_latency_ns %d, want %d (latency %d)", i, got, sent+latency-intended, latency)
			}
			previousSend = sent
		}
		// The last request left after the first: its latency is not the call's, and the wait before it left is
		// in its latency from the intended send alone.
		last := call[messages-1]
		if number(t, last, "t_ns") == callStart {
			t.Fatalf("every request of a call stamped with the call's start: %v", call)
		}
		if number(t, last, "intended_latency_ns")-number(t, last, "latency_ns") < number(t, last, "t_ns")-callStart {
			t.Fatalf("the last request's wait before it left is not in its intended latency: %v", last)
		}
	}
}

func TestAServerThatNeverAnswersFailsEachMessageWithItsStatus(t *testing.T) {
	target, _ := echotest.Silent(t)
	c := Config{Target: target, RPC: "stream", Concurrency: 1, Connections: 1, StreamMessages: 3,
		Duration: 50 * time.Millisecond, Timeout: 150 * time.Millisecond}
	summary, rows, err := load(t, context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if summary.OK != 0 || len(rows) == 0 || len(rows)%3 != 0 {
		t.Fatalf("summary %v, %d rows", summary, len(rows))
	}
	for _, row := range rows {
		if row["code"] != "DEADLINE_EXCEEDED" || row["error"] == "" || row["latency_ns"] != "" {
			t.Fatalf("row %v", row)
		}
	}
}

func TestCancellingFlushesWhatWasWritten(t *testing.T) {
	target, arrived := echotest.Silent(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	c := Config{Target: target, RPC: "unary", Concurrency: 2, Connections: 1, StreamMessages: 1,
		Duration: time.Hour, Timeout: time.Hour}
	_, rows, err := load(t, ctx, c)
	if !errors.Is(err, context.Canceled) || len(rows) != 0 {
		t.Fatalf("err %v, %d rows: a call cut short is not a measurement", err, len(rows))
	}
}

// notifyingBuffer is the CSV's destination, telling grown once it holds more than enough bytes.
type notifyingBuffer struct {
	mu     sync.Mutex
	buffer bytes.Buffer
	enough int
	grown  chan struct{}
}

func (b *notifyingBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buffer.Write(p)
	if b.buffer.Len() > b.enough && b.grown != nil {
		close(b.grown)
		b.grown = nil
	}
	return n, err
}

func TestAStreamCutShortKeepsTheAnswersThatCame(t *testing.T) {
	server := echotest.Start(t)
	// Streams far longer than the test: every row the CSV has before the cancel is of a call still in flight.
	c := Config{Target: server.Target, RPC: "stream", Concurrency: 4, Connections: 2, StreamMessages: 100_000,
		Duration: time.Hour, Timeout: time.Hour}
	out := &notifyingBuffer{enough: 64 << 10, grown: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	grown := out.grown
	go func() { <-grown; cancel() }()
	summary, err := Run(ctx, c, out)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	records, parseErr := csv.NewReader(&out.buffer).ReadAll()
	if parseErr != nil {
		t.Fatal(parseErr)
	}
	rows := records[1:]
	if summary.Calls != 0 || summary.Messages != len(rows) || summary.OK != len(rows) || len(rows) < 100 {
		t.Fatalf("summary %v for %d rows", summary, len(rows))
	}
	next := map[string]int{}
	for _, record := range rows {
		row := map[string]string{}
		for i, name := range Columns {
			row[name] = record[i]
		}
		// Each kept row is an answer, in its call's order, without an end the call never had.
		key := row["worker"] + "/" + row["call"]
		if row["message"] != strconv.Itoa(next[key]) || number(t, row, "latency_ns") <= 0 || row["error"] != "" ||
			row["call_latency_ns"] != "" || row["code"] != "" {
			t.Fatalf("row %v (expected message %d)", row, next[key])
		}
		next[key]++
	}
}

func TestCheckRefusesBeforeConnecting(t *testing.T) {
	good := Config{Target: echotest.ClosedPort, RPC: "unary", Concurrency: 2, Connections: 2, StreamMessages: 1,
		Duration: time.Second, Timeout: time.Second}
	for name, change := range map[string]func(*Config){
		"more connections than calls": func(c *Config) { c.Connections = 3 },
		"no such rpc":                 func(c *Config) { c.RPC = "bidi" },
		"no messages":                 func(c *Config) { c.StreamMessages = 0 },
		"no duration":                 func(c *Config) { c.Duration = 0 },
		"too many colons":             func(c *Config) { c.Target = "x:y:z" },
		"no port":                     func(c *Config) { c.Target = "127.0.0.1" },
		"a port by name":              func(c *Config) { c.Target = "127.0.0.1:http" },
		"port 0":                      func(c *Config) { c.Target = "127.0.0.1:0" },
		"port beyond 65535":           func(c *Config) { c.Target = "127.0.0.1:65536" },
		"no host":                     func(c *Config) { c.Target = ":50051" },
	} {
		c := good
		change(&c)
		if _, err := Run(context.Background(), c, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
