package hop

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"labkit/go/internal/limits"
)

// LoadColumns is the header of the load's CSV: one row per request, in the order the requests ended.
// t_ns is when the request was sent (ns since the epoch), connection which of the Connections sent it,
// status the HTTP status (0: no response), latency_ns from the send to the last byte of the body,
// bytes_in the body's length, error empty unless the request failed (a body other than the one asked
// for, when -body-sha256 is given, is an error).
var LoadColumns = []string{"t_ns", "connection", "status", "latency_ns", "bytes_in", "error"}

// LoadConfig is a closed loop of HTTP/1.1 GETs, as wrk's: Connections loops, each on a connection of its
// own, each sending its next request when its last is answered, for Duration.
type LoadConfig struct {
	URL         string
	Connections int
	Duration    string
	Timeout     string
	BodySHA256  string // the body every answer must have, in hex; "" checks nothing
}

// LoadSummary counts what a load sent and what came back.
type LoadSummary struct {
	Requests, OK int
	Elapsed      time.Duration
}

func (s LoadSummary) String() string {
	return fmt.Sprintf("%d requests, %d ok, in %.3f s", s.Requests, s.OK, s.Elapsed.Seconds())
}

// Load is a checked LoadConfig.
type Load struct {
	url         string
	connections int
	duration    time.Duration
	timeout     time.Duration
	body        []byte // the expected body's SHA-256, nil for none
}

// NewLoad checks every field against its bound before anything connects.
func NewLoad(c LoadConfig) (*Load, error) {
	target, err := url.Parse(c.URL)
	if err != nil || target.Scheme != "http" || target.Host == "" {
		return nil, fmt.Errorf("--url: %q is not an http://HOST:PORT/PATH URL", c.URL)
	}
	if c.Connections < 1 || c.Connections > limits.MaxConcurrency {
		return nil, fmt.Errorf("--connections: %d is not within 1 to %d", c.Connections, limits.MaxConcurrency)
	}
	duration, err := limits.ParseDuration("duration", c.Duration)
	if err != nil {
		return nil, err
	}
	timeout, err := limits.ParseDuration("timeout", c.Timeout)
	if err != nil {
		return nil, err
	}
	if duration <= 0 || timeout <= 0 {
		return nil, errors.New("--duration and --timeout must be longer than 0")
	}
	load := &Load{url: c.URL, connections: c.Connections, duration: duration, timeout: timeout}
	if c.BodySHA256 != "" {
		if load.body, err = hex.DecodeString(c.BodySHA256); err != nil || len(load.body) != sha256.Size {
			return nil, fmt.Errorf("--body-sha256: %q is not a SHA-256 in hex", c.BodySHA256)
		}
	}
	return load, nil
}

// rows is the CSV on out, written by every connection's loop as its requests end.
type rows struct {
	mu     sync.Mutex
	csv    *csv.Writer
	counts LoadSummary
}

func (r *rows) add(sent time.Time, connection, status int, latency time.Duration, bytesIn int64, failure string) error {
	record := []string{strconv.FormatInt(sent.UnixNano(), 10), strconv.Itoa(connection), strconv.Itoa(status),
		strconv.FormatInt(latency.Nanoseconds(), 10), strconv.FormatInt(bytesIn, 10), failure}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts.Requests++
	if failure == "" {
		r.counts.OK++
	}
	return r.csv.Write(record)
}

// Run sends the load and writes a CSV row per request on out; it stops sending at Duration or when ctx is
// cancelled (then requests in flight are abandoned and it returns ctx's error). Rows are written as the
// requests end, so memory does not grow with the duration.
func (l *Load) Run(ctx context.Context, out io.Writer) (LoadSummary, error) {
	table := &rows{csv: csv.NewWriter(out)}
	if err := table.csv.Write(LoadColumns); err != nil {
		return LoadSummary{}, err
	}
	start := time.Now()
	end := start.Add(l.duration)
	var wg sync.WaitGroup
	failed := make(chan error, l.connections)
	for connection := 0; connection < l.connections; connection++ {
		wg.Add(1)
		go func(connection int) {
			defer wg.Done()
			if err := l.loop(ctx, connection, end, table); err != nil {
				failed <- err
			}
		}(connection)
	}
	wg.Wait()
	close(failed)
	table.mu.Lock()
	defer table.mu.Unlock()
	table.csv.Flush()
	table.counts.Elapsed = time.Since(start)
	if err := errors.Join(ctx.Err(), <-failed, table.csv.Error()); err != nil {
		return table.counts, err
	}
	return table.counts, nil
}

// loop is one connection's requests: the next one sent as soon as the last is answered (its body read to the
// end), until the end of the load. Its client has one connection, kept alive, and opens a new one only after
// a failure closed it.
func (l *Load) loop(ctx context.Context, connection int, end time.Time, table *rows) error {
	transport := &http.Transport{
		Proxy:               nil, // straight to the URL: a proxy from the environment would be another hop
		DialContext:         (&net.Dialer{Timeout: l.timeout}).DialContext,
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true, // the body as the back sends it, as wrk reads it
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: l.timeout}
	digest := sha256.New()
	// io.Copy would allocate 32 KiB per request for the body (a hash takes no ReaderFrom): at tens of thousands of
	// requests a second, collecting that garbage was CPU taken from the services under test.
	buffer := make([]byte, 32<<10)
	for ctx.Err() == nil && time.Now().Before(end) {
		sent := time.Now()
		status, bytesIn, failure := l.get(ctx, client, digest, buffer)
		latency := time.Since(sent)
		if ctx.Err() != nil {
			return nil // interrupted: this request's answer is not a measurement
		}
		if err := table.add(sent, connection, status, latency, bytesIn, failure); err != nil {
			return err
		}
	}
	return nil
}

// get is one request: its status (0 for none), the body's length, and what went wrong ("" for nothing).
func (l *Load) get(ctx context.Context, client *http.Client, digest hash.Hash, buffer []byte) (int, int64, string) {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
	if err != nil {
		return 0, 0, err.Error()
	}
	response, err := client.Do(request)
	if err != nil {
		return 0, 0, err.Error()
	}
	defer response.Body.Close()
	digest.Reset()
	bytesIn, err := io.CopyBuffer(digest, response.Body, buffer)
	switch {
	case err != nil:
		return response.StatusCode, bytesIn, "reading the body: " + err.Error()
	case response.StatusCode < 200 || response.StatusCode > 299:
		return response.StatusCode, bytesIn, "HTTP " + strconv.Itoa(response.StatusCode)
	case l.body != nil && string(digest.Sum(nil)) != string(l.body):
		return response.StatusCode, bytesIn, "a body other than the back's"
	}
	return response.StatusCode, bytesIn, ""
}
