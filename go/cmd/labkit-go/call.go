package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"google.golang.org/grpc/metadata"
	"iter"
	mathrand "math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"labkit/go/echopb"
	"labkit/go/internal/address"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
	"labkit/go/internal/pyrandom"
	"labkit/go/internal/units"
)

type callFlags struct {
	target, sizes, gap, backgroundGap, order, timeout, tlsCA, tlsServerName string
	repeats, warmup, keepaliveMs                                            int
	seed                                                                    int64
	seedGiven, cold, tcpInfo                                                bool
	grpcOptions                                                             repeated
	given                                                                   map[string]bool
}

// callPlan is what the flags mean, checked.
type callPlan struct {
	sizes                    []int64
	gap, background, timeout time.Duration
	values                   options.Values
	dial                     []grpc.DialOption
}

func callCommand(flags *flag.FlagSet, args []string) error {
	var f callFlags
	flags.StringVar(&f.target, "target", "", "HOST:PORT of an echo server")
	flags.StringVar(&f.sizes, "sizes", "", fmt.Sprintf("comma-separated request sizes in bytes, e.g. 1000,14000,16k (each at most %d)", limits.MaxRequestBytes))
	flags.IntVar(&f.repeats, "repeats", 10, fmt.Sprintf("calls per size (at most %d)", limits.MaxRepeats))
	flags.StringVar(&f.gap, "gap", "1s", "idle time between the end of one call and the start of the next"+atMost)
	flags.StringVar(&f.backgroundGap, "background-gap", "", "also send a 1-byte call on the same channel this often (not recorded)"+atMost)
	flags.BoolVar(&f.cold, "cold", false, "open a new channel (connection) for every call")
	flags.IntVar(&f.warmup, "warmup", 0, fmt.Sprintf("unrecorded calls first (at most %d)", limits.MaxWarmup))
	flags.Func("seed", "seed of the payload bytes and of --order shuffled", func(v string) error {
		_, err := fmt.Sscan(v, &f.seed)
		f.seedGiven = true
		return err
	})
	flags.StringVar(&f.order, "order", "sequential", "sequential or shuffled")
	flags.IntVar(&f.keepaliveMs, "keepalive-ms", 0, fmt.Sprintf("send HTTP/2 keepalive pings this often, also between calls (at most %d)", limits.MaxKeepaliveMs))
	flags.BoolVar(&f.tcpInfo, "tcp-info", false, "add the connection's TCP state (TCP_INFO) before and after each call")
	flags.StringVar(&f.timeout, "timeout", "30s", "deadline of each call"+atMost)
	flags.StringVar(&f.tlsCA, "tls-ca", "", "PEM root certificate; use TLS")
	flags.StringVar(&f.tlsServerName, "tls-server-name", "", "name to verify in the server certificate instead of HOST")
	flags.Var(&f.grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable)")
	if err := parse(flags, args); err != nil {
		return err
	}
	f.given = givenFlags(flags)
	plan, err := f.plan()
	if err != nil {
		return err
	}
	return f.run(plan)
}

func (f *callFlags) plan() (*callPlan, error) {
	p := &callPlan{}
	var err error
	if f.target == "" {
		return nil, fmt.Errorf("--target HOST:PORT is required")
	}
	if _, _, err = address.Parse(f.target, false); err != nil {
		return nil, fmt.Errorf("--target: %v", err)
	}
	if p.sizes, err = units.ParseSizeList(f.sizes, 0, limits.MaxRequestBytes); err != nil {
		return nil, fmt.Errorf("--sizes: %v", err)
	}
	if f.repeats < 1 || f.repeats > limits.MaxRepeats || f.warmup < 0 || f.warmup > limits.MaxWarmup {
		return nil, fmt.Errorf("--repeats must be between 1 and %d and --warmup between 0 and %d", limits.MaxRepeats, limits.MaxWarmup)
	}
	if len(p.sizes)*f.repeats > limits.MaxCalls {
		return nil, fmt.Errorf("%d sizes × %d repeats is more than %d calls", len(p.sizes), f.repeats, limits.MaxCalls)
	}
	if f.keepaliveMs < 0 || f.keepaliveMs > limits.MaxKeepaliveMs || (f.keepaliveMs == 0 && f.given["keepalive-ms"]) {
		return nil, fmt.Errorf("--keepalive-ms must be between 1 and %d", limits.MaxKeepaliveMs)
	}
	if f.order != "sequential" && f.order != "shuffled" {
		return nil, fmt.Errorf("--order is sequential or shuffled, not %q", f.order)
	}
	if p.gap, err = boundedDuration("gap", f.gap); err != nil {
		return nil, err
	}
	if p.timeout, err = boundedDuration("timeout", f.timeout); err != nil {
		return nil, err
	}
	if f.backgroundGap != "" {
		if p.background, err = boundedDuration("background-gap", f.backgroundGap); err != nil {
			return nil, err
		}
		if p.background <= 0 {
			return nil, fmt.Errorf("--background-gap must be a positive duration")
		}
		if f.cold {
			return nil, fmt.Errorf("--background-gap needs one shared channel; it cannot be combined with --cold")
		}
	}
	if f.tlsServerName != "" && f.tlsCA == "" {
		return nil, fmt.Errorf("--tls-server-name needs --tls-ca")
	}
	if p.values, err = options.Parse(f.grpcOptions, "client"); err != nil {
		return nil, err
	}
	if p.dial, err = f.dialOptions(p.values); err != nil {
		return nil, err
	}
	return p, nil
}

func (f *callFlags) dialOptions(values options.Values) ([]grpc.DialOption, error) {
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if f.tlsCA != "" {
		pem, err := readRegular(f.tlsCA, "tls-ca", maxPEMBytes)
		if err != nil {
			return nil, err
		}
		config, err := rootsConfig(pem, f.tlsCA, f.tlsServerName)
		if err != nil {
			return nil, err
		}
		dial[0] = grpc.WithTransportCredentials(credentials.NewTLS(config))
	}
	if f.keepaliveMs > 0 {
		// grpc-go raises a client keepalive below 10 s to 10 s; the Python client pings as asked.
		dial = append(dial, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: time.Duration(f.keepaliveMs) * time.Millisecond, Timeout: max(time.Duration(f.keepaliveMs)*time.Millisecond, 20*time.Second),
			PermitWithoutStream: true}))
	}
	if values == nil {
		return dial, nil
	}
	optionDial, err := values.DialOptions()
	if err != nil {
		return nil, err
	}
	return append(dial, optionDial...), nil
}

// rootsConfig is a TLS client config trusting the PEM roots, checking serverName instead of the host when given.
func rootsConfig(pem []byte, path, serverName string) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s is not a PEM certificate (no BEGIN CERTIFICATE block)", path)
	}
	return &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

// schedule is the calls to make as (recorded, size): warm-up first (sizes in turn), then repeats
// of each size, in order or shuffled, as Python's call_schedule: with a seed, shuffled by CPython's
// generator, so both implementations make the same calls in the same order. It is generated as the
// calls are made: in order nothing is held per call, shuffled one index per call (the order must exist
// whole to be shuffled; at most limits.MaxCalls), never a call's row.
func (f *callFlags) schedule(sizes []int64) iter.Seq2[bool, int64] {
	return func(yield func(bool, int64) bool) {
		for i := 0; i < f.warmup; i++ {
			if !yield(false, sizes[i%len(sizes)]) {
				return
			}
		}
		if f.order != "shuffled" {
			for _, size := range sizes {
				for range f.repeats {
					if !yield(true, size) {
						return
					}
				}
			}
			return
		}
		for _, index := range f.shuffledOrder(len(sizes)) {
			if !yield(true, sizes[index]) {
				return
			}
		}
	}
}

// shuffledOrder is the index into sizes of every recorded call, shuffled: f.repeats of each index.
func (f *callFlags) shuffledOrder(sizeCount int) []uint32 {
	order := make([]uint32, 0, sizeCount*f.repeats)
	for index := range sizeCount {
		for range f.repeats {
			order = append(order, uint32(index))
		}
	}
	swap := func(i, j int) { order[i], order[j] = order[j], order[i] }
	if f.seedGiven {
		pyrandom.New(f.seed).Shuffle(len(order), swap)
	} else {
		mathrand.Shuffle(len(order), swap)
	}
	return order
}

// boundedDuration parses a duration flag of at most limits.MaxDuration, the bound of Python's twin.
func boundedDuration(name, text string) (time.Duration, error) {
	duration, err := units.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("--%s: %v", name, err)
	}
	if duration > limits.MaxDuration {
		return 0, fmt.Errorf("--%s: %q is longer than %s", name, text, hours(limits.MaxDuration))
	}
	return duration, nil
}

// hours is a bound as --help states it: 168h.
func hours(d time.Duration) string { return fmt.Sprintf("%dh", int64(d/time.Hour)) }

// atMost is the bound every duration flag's help states.
var atMost = fmt.Sprintf(" (at most %s)", hours(limits.MaxDuration))

// summary counts every call, the unrecorded ones included, for the line on stderr.
type summary struct {
	recordedOK, recordedFailed, warmupOK, warmupFailed int
	backgroundOK, backgroundFailed                     atomic.Int64
}

func (s *summary) describe() string {
	return fmt.Sprintf("%d recorded calls (%d failed), %d warmup (%d failed), %d background (%d failed)",
		s.recordedOK+s.recordedFailed, s.recordedFailed, s.warmupOK+s.warmupFailed, s.warmupFailed,
		s.backgroundOK.Load()+s.backgroundFailed.Load(), s.backgroundFailed.Load())
}

func (f *callFlags) run(p *callPlan) error {
	ctx, stoppedBy := stopOnSignal()
	var payloads *pyrandom.Rand // nil: unseeded, from crypto/rand
	if f.seedGiven {
		payloads = pyrandom.New(f.seed)
	}
	pool := newChannelPool(f.target, p, f.cold)
	defer pool.close()
	var counts summary
	out := json.NewEncoder(os.Stdout)
	seq := 0
	var previousEnd time.Time
	for recorded, size := range f.schedule(p.sizes) {
		payload := make([]byte, size)
		fillRandom(payload, payloads)
		channel, err := pool.next()
		if err != nil {
			return err
		}
		// The gap runs from the end of one call to the start of the next: the connection's idle time.
		if !previousEnd.IsZero() && !sleepUntil(ctx, previousEnd.Add(p.gap)) {
			return interruptedAfter(&counts, stoppedBy())
		}
		var row map[string]any
		row, previousEnd = f.timedCall(ctx, channel, p, recorded, seq, payload)
		if ctx.Err() != nil { // the signal cut this call short: it measured nothing
			return interruptedAfter(&counts, stoppedBy())
		}
		pool.afterCall(channel, p, &counts)
		counts.count(recorded, row["ok"] == true)
		if recorded {
			if err := out.Encode(row); err != nil {
				return fmt.Errorf("cannot write a row: %v", err)
			}
			seq++
		}
	}
	pool.close()
	fmt.Fprintf(os.Stderr, "labkit-go call: %s\n", counts.describe())
	if counts.recordedFailed > 0 && counts.recordedOK == 0 {
		os.Exit(1) // every call failed: the rows say why, the status says that nothing was measured
	}
	return nil
}

// stopOnSignal is a context cancelled by the first SIGINT or SIGTERM, and the signal that cancelled it. Notify
// also takes SIGINT back from a shell that started labkit-go in the background with it ignored. A call in
// flight is cancelled too, so a signal stops the run at once, not when a call against a silent target times out.
func stopOnSignal() (context.Context, func() os.Signal) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	var received atomic.Value
	go func() {
		received.Store(<-signals)
		cancel()
	}()
	return ctx, func() os.Signal { sig, _ := received.Load().(os.Signal); return sig }
}

// sleepUntil waits until t; false when ctx was cancelled first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// timedCall makes one Echo on ch, with the TCP state around it for a recorded call when asked;
// its row and the moment it ended (the start of the next gap).
func (f *callFlags) timedCall(ctx context.Context, ch *channel, p *callPlan, recorded bool, seq int, payload []byte) (map[string]any, time.Time) {
	row := map[string]any{"seq": seq, "payload_bytes": len(payload), "cold": ch.calls == 0, "background": backgroundSeconds(p)}
	sampled := recorded && f.tcpInfo
	if sampled {
		echo.RecordTCP(row, ch.holder.Get(), "before")
	}
	row["t_start_utc_ns"] = time.Now().UnixNano()
	outcome := timedEcho(ctx, ch.stub, payload, p.timeout)
	ended := time.Now()
	if sampled { // before a cold call's channel closes
		echo.RecordTCP(row, ch.holder.Get(), "after")
	}
	row["rtt_ns"], row["ok"], row["grpc_code"] = outcome.rtt.Nanoseconds(), outcome.detail == "", outcome.code
	row["server_ns"] = outcome.serverTime()
	if outcome.detail != "" {
		row["error"] = outcome.detail
	}
	return row, ended
}

func (s *summary) count(recorded, ok bool) {
	switch {
	case recorded && ok:
		s.recordedOK++
	case recorded:
		s.recordedFailed++
	case ok:
		s.warmupOK++
	default:
		s.warmupFailed++
	}
}

// interruptedAfter ends the run as Python's client does on a signal: the summary, and the shell's exit status
// for it, 128 + the signal (130 for SIGINT, 143 for SIGTERM).
func interruptedAfter(counts *summary, sig os.Signal) error {
	fmt.Fprintf(os.Stderr, "labkit-go call: interrupted after %s\n", counts.describe())
	status := 130
	if sig == syscall.SIGTERM {
		status = 143
	}
	os.Exit(status)
	return nil
}

func backgroundSeconds(p *callPlan) any {
	if p.background == 0 {
		return nil
	}
	return p.background.Seconds()
}

// fillRandom fills payload with random bytes, so no layer can compress the request: with a seed,
// the bytes Python's random.Random(seed).randbytes gives the same call.
func fillRandom(payload []byte, seeded *pyrandom.Rand) {
	if seeded != nil {
		seeded.Fill(payload)
		return
	}
	_, _ = rand.Read(payload)
}

// echoOutcome is one timed Echo: its latency, its status, why it failed ("" when ok), and the server's own time
// from its trailer (-1 when the server sent none).
type echoOutcome struct {
	rtt      time.Duration
	code     string
	detail   string
	serverNs int64
}

// timedEcho calls Echo once, timed around the blocking call alone; a failure is an outcome, not an error.
func timedEcho(parent context.Context, stub echopb.EchoServiceClient, payload []byte, timeout time.Duration) echoOutcome {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	request := &echopb.EchoRequest{Payload: payload}
	var trailer metadata.MD
	started := time.Now()
	response, err := stub.Echo(ctx, request, grpc.Trailer(&trailer))
	outcome := echoOutcome{rtt: time.Since(started), code: "OK", serverNs: -1}
	if values := trailer.Get(echo.ServerTimeKey); len(values) > 0 {
		if ns, parseErr := strconv.ParseInt(values[0], 10, 64); parseErr == nil {
			outcome.serverNs = ns
		}
	}
	if err != nil {
		st := status.Convert(err)
		outcome.code, outcome.detail = codeName(st.Code()), st.Message()
		if outcome.detail == "" {
			outcome.detail = outcome.code
		}
		return outcome
	}
	if response.GetPayloadLength() != int64(len(payload)) {
		outcome.detail = fmt.Sprintf("server reported payload_length %d, sent %d bytes", response.GetPayloadLength(), len(payload))
	}
	return outcome
}

// serverTime is a row's server_ns: null when the server sent no time.
func (o echoOutcome) serverTime() any {
	if o.serverNs < 0 {
		return nil
	}
	return o.serverNs
}

// codeName is a status code as grpcio names it (DEADLINE_EXCEEDED, not DeadlineExceeded).
func codeName(code codes.Code) string {
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
