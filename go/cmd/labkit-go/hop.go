package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"

	"labkit/go/internal/hop"
	"labkit/go/internal/limits"
)

// backCommand is `labkit-go back`, the back service of `labkit hop` (go/internal/hop): one JSON ready line once
// every endpoint listens, then it serves until SIGTERM or SIGINT.
func backCommand(flags *flag.FlagSet, args []string) error {
	var c hop.BackConfig
	flags.StringVar(&c.Bind, "bind", "", "HOST:PORT of the HTTP/1.1 and h2c endpoint (GET /products); port 0 picks a free port")
	flags.IntVar(&c.GRPCPort, "grpc-port", 0, "port of the gRPC endpoint (BackService.Get) on the --bind host (0: a free one)")
	flags.StringVar(&c.BodyFile, "body-file", "", fmt.Sprintf("answer this file's bytes (at most %d MiB) [default: a %d-byte JSON product list]",
		limits.MaxBodyBytes>>20, len(hop.DefaultBody())))
	flags.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate chain: also serve HTTP/2 and HTTP/1.1 over TLS on --tls-port")
	flags.StringVar(&c.TLSKey, "tls-key", "", "PEM private key for --tls-cert")
	flags.IntVar(&c.TLSPort, "tls-port", 0, "port of the TLS endpoint (0: a free one)")
	flags.StringVar(&c.NATSURL, "nats-url", "", "also answer NATS requests, from the server at nats://HOST:PORT")
	flags.StringVar(&c.NATSSubject, "nats-subject", hop.DefaultSubject, "the subject to answer on")
	flags.IntVar(&c.NATSWorkers, "nats-workers", 1, "NATS subscriptions answering at once (one queue group)")
	flags.StringVar(&c.Grace, "grace", "2s", "time requests in flight get to finish on stop"+atMost)
	if err := parse(flags, args); err != nil {
		return err
	}
	c.Given, c.Version = givenFlags(flags), version
	stop := notifyStop()
	back, err := hop.StartBack(c)
	if err != nil {
		return err
	}
	defer back.Stop()
	return untilStopped("back", back.Ready, stop)
}

// frontCommand is `labkit-go front`, the relay of `labkit hop`: one JSON ready line once every endpoint listens
// and one call over every relay returned the back's body, then it serves until SIGTERM or SIGINT.
func frontCommand(flags *flag.FlagSet, args []string) error {
	var c hop.FrontConfig
	flags.StringVar(&c.Bind, "bind", "", "HOST:PORT of the HTTP/1.1 endpoint (GET /via/<transport>); port 0 picks a free port")
	flags.IntVar(&c.GRPCPort, "grpc-port", 0, "port of the gRPC endpoint (BackService.Get{via}) on the --bind host (0: a free one)")
	flags.StringVar(&c.BackGRPC, "back-grpc", "", "relay /via/grpc to the back's gRPC endpoint at HOST:PORT")
	flags.IntVar(&c.GRPCChannels, "grpc-channels", 1, "gRPC channels (connections) to the back, used round robin")
	flags.StringVar(&c.BackHTTP2, "back-http2", "", "relay /via/http2 over one h2c connection to http://HOST:PORT")
	flags.StringVar(&c.BackHTTP2TLS, "back-http2-tls", "", "relay /via/http2-tls over one TLS connection to https://HOST:PORT")
	flags.StringVar(&c.BackCA, "back-ca", "", "PEM CA certificate that signed the back's TLS certificate")
	flags.StringVar(&c.NATSURL, "nats-url", "", "relay /via/nats as requests through the NATS server at nats://HOST:PORT")
	flags.StringVar(&c.NATSSubject, "nats-subject", hop.DefaultSubject, "the subject the back answers on")
	flags.StringVar(&c.Timeout, "timeout", "5s", "deadline of each relayed call (then 502)"+atMost)
	flags.StringVar(&c.Grace, "grace", "2s", "time requests in flight get to finish on stop"+atMost)
	if err := parse(flags, args); err != nil {
		return err
	}
	c.Version = version
	stop := notifyStop()
	front, err := hop.StartFront(c)
	if err != nil {
		return err
	}
	defer front.Stop()
	return untilStopped("front", front.Ready, stop)
}

// loadCommand is `labkit-go load`, the closed-loop HTTP load of `labkit hop --tool labkit-go`: every request
// timed on its own and written as a CSV row (go/internal/hop LoadColumns), a summary line on stderr at the end.
// On SIGINT or SIGTERM the rows so far are kept and it exits with the shell's status for the signal.
func loadCommand(flags *flag.FlagSet, args []string) error {
	var c hop.LoadConfig
	var out string
	flags.StringVar(&c.URL, "url", "", "http://HOST:PORT/PATH to GET")
	flags.IntVar(&c.Connections, "connections", 10, fmt.Sprintf("connections, each with one request in flight (at most %d)", limits.MaxConcurrency))
	flags.StringVar(&c.Duration, "duration", "10s", "how long to send requests"+atMost)
	flags.StringVar(&c.Timeout, "timeout", "5s", "deadline of each request, connecting included"+atMost)
	flags.StringVar(&c.BodySHA256, "body-sha256", "", "SHA-256 (hex) every answer's body must have; another is an error")
	flags.StringVar(&out, "out", "", "write the CSV here instead of stdout")
	if err := parse(flags, args); err != nil {
		return err
	}
	load, err := hop.NewLoad(c)
	if err != nil {
		return err
	}
	writer, closeOut, err := output(out)
	if err != nil {
		return err
	}
	ctx, stoppedBy := stopOnSignal()
	summary, err := load.Run(ctx, writer)
	if closeErr := closeOut(); err == nil {
		err = closeErr
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "labkit-go load: interrupted after %s\n", summary)
		os.Exit(128 + int(stoppedBy().(syscall.Signal)))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "labkit-go load: %s\n", summary)
	if summary.OK == 0 {
		os.Exit(1)
	}
	return nil
}

// output is stdout, or a new file at path (replacing one there), with what closes it.
func output(path string) (io.Writer, func() error, error) {
	if path == "" {
		return os.Stdout, func() error { return nil }, nil
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--out: %v", err)
	}
	buffered := bufio.NewWriterSize(file, 1<<16)
	return buffered, func() error { return errors.Join(buffered.Flush(), file.Close()) }, nil
}
