// Package grpcload is a closed loop of gRPC echo calls that times every message, the gRPC load of
// `labkit load --grpc-tool labkit-go`. ghz times a call; inside a stream of ten requests it cannot say
// when each answer came, and a stream call's latency divided by its messages is a time no message
// waited. Here each request's answer is timed from that request's own send, so a message inside a
// stream and a unary call can be compared at the same number of messages in flight.
package grpcload

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
)

// Columns is the header of the CSV: one row per request message, written as that message completes, so that a
// load stopped by a signal keeps every answer that came. call_t_ns is when the call began (ns since the epoch),
// worker the loop that made it, connection which of the Connections carried it, call the worker's count of its
// calls, message the request's place in its call (0 for a unary call), t_ns when that request was handed to
// grpc-go, latency_ns from then to its answer's arrival, call_latency_ns from the call's start to its end (for a
// stream: the server's end of stream after the last answer), code the call's gRPC status as grpcio names it,
// error empty unless this message failed. A stream's answers are written as they arrive, before the call's end is
// known: call_latency_ns and code are on the call's last row (the rows written at its end), empty before it, and
// empty on every row of a call a signal cut short. intended_latency_ns, beside latency_ns, times the same answer
// from when the closed loop meant to send the request (see callRows.intended): inside a stream, the wait before a
// request left (a window full of earlier requests, its own and other calls') is in it, and latency_ns leaves it out.
var Columns = []string{"call_t_ns", "worker", "connection", "call", "message", "t_ns", "latency_ns",
	"call_latency_ns", "code", "error", "intended_latency_ns"}

// RPCs are the calls a load can make.
var RPCs = []string{"unary", "stream"}

// Config is a load: Concurrency workers, each making one call after another on connection worker %
// Connections, for Duration; a stream call sends StreamMessages requests back to back while it reads the answers.
type Config struct {
	Target         string
	Dial           echo.Dial
	RPC            string
	Concurrency    int
	Connections    int
	StreamMessages int
	Payload        []byte
	Duration       time.Duration
	Timeout        time.Duration
}

// Check refuses a config outside its bounds before anything connects.
func (c Config) Check() error {
	if err := checkTarget(c.Target); err != nil {
		return err
	}
	switch {
	case c.RPC != "unary" && c.RPC != "stream":
		return fmt.Errorf("--rpc: %q is not unary or stream", c.RPC)
	case c.Concurrency < 1 || c.Concurrency > limits.MaxConcurrency:
		return fmt.Errorf("--concurrency: %d is not within 1 to %d", c.Concurrency, limits.MaxConcurrency)
	case c.Connections < 1 || c.Connections > c.Concurrency:
		return fmt.Errorf("--connections: %d is not within 1 to the concurrency (%d)", c.Connections, c.Concurrency)
	case c.StreamMessages < 1 || c.StreamMessages > limits.MaxStreamMessages:
		return fmt.Errorf("--stream-messages: %d is not within 1 to %d", c.StreamMessages, limits.MaxStreamMessages)
	case len(c.Payload) > limits.MaxEchoPayloadBytes:
		return fmt.Errorf("--payload-file: %d bytes, more than %d", len(c.Payload), limits.MaxEchoPayloadBytes)
	case c.Duration <= 0 || c.Timeout <= 0:
		return errors.New("--duration and --timeout must be longer than 0")
	}
	return nil
}

// checkTarget refuses a target that is not HOST:PORT with a port number: grpc-go would take "x:y:z" as a name
// to resolve and fail every call of the load, each on its own.
func checkTarget(target string) error {
	if target == "" {
		return errors.New("--target: give HOST:PORT")
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("--target: %q is not HOST:PORT (%v)", target, err)
	}
	if number, err := strconv.ParseUint(port, 10, 16); host == "" || err != nil || number == 0 {
		return fmt.Errorf("--target: %q is not HOST:PORT with a host and a port from 1 to 65535", target)
	}
	return nil
}

// Summary counts what a load sent and what came back: Calls that ended, Messages written (those of calls a signal
// cut short included), OK of them answered.
type Summary struct {
	Calls, Messages, OK int
	Elapsed             time.Duration
}

func (s Summary) String() string {
	return fmt.Sprintf("%d calls, %d messages, %d ok, in %.3f s", s.Calls, s.Messages, s.OK, s.Elapsed.Seconds())
}

// table is the CSV, shared by the workers; times are kept as offsets on one monotonic clock from base and
// written as epoch ns, so a wall-clock step during the load moves no latency.
type table struct {
	mu     sync.Mutex
	csv    *csv.Writer
	base   time.Time
	counts Summary
}

// message is one request of a call and what became of it.
type message struct {
	sent, answered time.Duration // offsets from base; answered 0 when no answer came
	failure        string
}

// callRows is where one call's rows go: written tells the rows written as their answers came (messages before it).
type callRows struct {
	table                    *table
	worker, connection, call int
	start                    time.Duration
	// intended is when the closed loop meant to send every request of the call: when its predecessor (the worker's
	// call before) ended with its last answer, or for a worker's first call its start. A stream sends its requests
	// back to back, so each is due then; a request that left later waited for the stream (or the worker) to take it.
	intended time.Duration
	written  int
}

func (t *table) epoch(offset time.Duration) string {
	return strconv.FormatInt(t.base.UnixNano()+offset.Nanoseconds(), 10)
}

// write is the row of message i; callLatency and code empty while the call has not ended.
func (r *callRows) write(i int, m message, callLatency, code string) error {
	t := r.table
	latency, intended := "", ""
	if m.failure == "" {
		latency = strconv.FormatInt((m.answered - m.sent).Nanoseconds(), 10)
		intended = strconv.FormatInt((m.answered - r.intended).Nanoseconds(), 10)
		t.counts.OK++
	}
	t.counts.Messages++
	return t.csv.Write([]string{t.epoch(r.start), strconv.Itoa(r.worker), strconv.Itoa(r.connection),
		strconv.Itoa(r.call), strconv.Itoa(i), t.epoch(m.sent), latency, callLatency, code, m.failure, intended})
}

// answered writes the row of message i, answered while its call goes on.
func (r *callRows) answered(i int, m message) error {
	r.table.mu.Lock()
	defer r.table.mu.Unlock()
	r.written = i + 1
	return r.write(i, m, "", "")
}

// ended writes the rows of the call's messages not yet written, with the call's latency and status.
func (r *callRows) ended(end time.Duration, code string, messages []message) error {
	r.table.mu.Lock()
	defer r.table.mu.Unlock()
	r.table.counts.Calls++
	for i := r.written; i < len(messages); i++ {
		if err := r.write(i, messages[i], strconv.FormatInt((end-r.start).Nanoseconds(), 10), code); err != nil {
			return err
		}
	}
	return nil
}

// interrupted writes the rows of the messages answered but not yet written when a signal cut the call short; its
// unanswered ones are not a measurement, nor is its end.
func (r *callRows) interrupted(messages []message) error {
	r.table.mu.Lock()
	defer r.table.mu.Unlock()
	for i := r.written; i < len(messages); i++ {
		if m := messages[i]; m.answered != 0 && m.failure == "" {
			if err := r.write(i, m, "", ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// Run makes the load and writes its CSV on out. Workers stop starting calls at Duration; a call in flight then
// ends within its Timeout. When ctx is cancelled, calls in flight are abandoned, the answers they had are kept as
// rows, and ctx's error is returned with everything written flushed.
func Run(ctx context.Context, c Config, out io.Writer) (Summary, error) {
	if err := c.Check(); err != nil {
		return Summary{}, err
	}
	dial, err := c.Dial.DialOptions()
	if err != nil {
		return Summary{}, err
	}
	stubs := make([]echopb.EchoServiceClient, c.Connections)
	for i := range stubs {
		// Each ClientConn is a connection of its own: a pool as the tuning article means it.
		conn, err := grpc.NewClient(c.Target, dial...)
		if err != nil {
			return Summary{}, fmt.Errorf("cannot use target %s: %v", c.Target, err)
		}
		defer conn.Close()
		stubs[i] = echopb.NewEchoServiceClient(conn)
	}
	t := &table{csv: csv.NewWriter(out), base: time.Now()}
	if err := t.csv.Write(Columns); err != nil {
		return Summary{}, err
	}
	end := t.base.Add(c.Duration)
	var wg sync.WaitGroup
	failed := make(chan error, c.Concurrency)
	for worker := 0; worker < c.Concurrency; worker++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			connection := worker % c.Connections
			previousEnd := time.Duration(-1) // none before the worker's first call
			for call := 0; ctx.Err() == nil && time.Now().Before(end); call++ {
				rows := &callRows{table: t, worker: worker, connection: connection, call: call, intended: previousEnd}
				code, messages, err := c.call(ctx, stubs[connection], rows)
				if err == nil && ctx.Err() != nil && code != "OK" {
					err = rows.interrupted(messages) // its end is the signal's, not the server's
				} else if err == nil {
					previousEnd = time.Since(t.base)
					err = rows.ended(previousEnd, code, messages)
				}
				if err != nil {
					failed <- err
					return
				}
			}
		}(worker)
	}
	wg.Wait()
	close(failed)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.csv.Flush()
	t.counts.Elapsed = time.Since(t.base)
	return t.counts, errors.Join(ctx.Err(), <-failed, t.csv.Error())
}

// call is one call (unary or stream): its status and each request's times, rows.start set to when it began. A
// stream's answers but the last are written as they come; the error is only a row's that could not be written.
func (c Config) call(parent context.Context, stub echopb.EchoServiceClient, rows *callRows) (string, []message, error) {
	ctx, cancel := context.WithTimeout(parent, c.Timeout)
	defer cancel()
	base := rows.table.base
	rows.start = time.Since(base)
	if rows.intended < 0 {
		rows.intended = rows.start
	}
	if c.RPC == "unary" {
		response, err := stub.Echo(ctx, &echopb.EchoRequest{Payload: c.Payload})
		m := message{sent: rows.start, answered: time.Since(base)}
		code := "OK"
		if err != nil {
			code, m.failure = failure(err)
			m.answered = 0
		} else if response.GetPayloadLength() != int64(len(c.Payload)) {
			m.failure = fmt.Sprintf("server reported payload_length %d, sent %d bytes", response.GetPayloadLength(), len(c.Payload))
		}
		return code, []message{m}, nil
	}
	return c.stream(ctx, stub, rows)
}

// stream sends StreamMessages requests on one EchoStream, from a goroutine of their own so that a window full of
// requests never stops the answers being read, and times each answer from its own request's send. The server
// answers requests in order, so answer i is request i's. Each answer but the last is written as it arrives; the
// last waits for the call's end, whose latency and status its row carries.
func (c Config) stream(ctx context.Context, stub echopb.EchoServiceClient, rows *callRows) (string, []message, error) {
	base, start := rows.table.base, rows.start
	messages := make([]message, c.StreamMessages)
	// The sender stores each send time before handing the request over; the reader loads it only after that
	// request's answer, which cannot come before the send.
	sent := make([]atomic.Int64, len(messages))
	fail := func(from int, err error) (string, []message, error) {
		code, text := failure(err)
		for i := from; i < len(messages); i++ {
			messages[i].failure = text
			// A request never handed over is stamped with the call's start.
			messages[i].sent = max(time.Duration(sent[i].Load()), start)
		}
		return code, messages, nil
	}
	stream, err := stub.EchoStream(ctx)
	if err != nil {
		return fail(0, err)
	}
	sendDone := make(chan error, 1)
	go func() {
		request := &echopb.EchoRequest{Payload: c.Payload}
		for i := range sent {
			sent[i].Store(int64(time.Since(base)))
			if err := stream.Send(request); err != nil {
				sendDone <- err // io.EOF: the stream ended; Recv says why
				return
			}
		}
		sendDone <- stream.CloseSend()
	}()
	for i := range messages {
		response, err := stream.Recv()
		answered := time.Since(base)
		messages[i].sent = time.Duration(sent[i].Load())
		if err == io.EOF {
			err = errors.New("the server ended the stream before answering every request")
		}
		if err != nil {
			return fail(i, err)
		}
		messages[i].answered = answered
		if response.GetPayloadLength() != int64(len(c.Payload)) {
			messages[i].failure = fmt.Sprintf("server reported payload_length %d, sent %d bytes",
				response.GetPayloadLength(), len(c.Payload))
		}
		if i < len(messages)-1 {
			if err := rows.answered(i, messages[i]); err != nil {
				return "", messages, err
			}
		}
	}
	if err := <-sendDone; err != nil && err != io.EOF {
		return fail(len(messages), err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		if err == nil {
			err = errors.New("the server answered more requests than were sent")
		}
		code, _ := failure(err)
		return code, messages, nil
	}
	return "OK", messages, nil
}

// failure is a failed call's status name and text.
func failure(err error) (string, string) {
	st := status.Convert(err)
	text := st.Message()
	if text == "" {
		text = echo.CodeName(st.Code())
	}
	return echo.CodeName(st.Code()), text
}
