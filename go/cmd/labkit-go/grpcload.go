package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"

	"labkit/go/internal/files"
	"labkit/go/internal/grpcload"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
)

// grpcLoadCommand is the gRPC load of `labkit load --grpc-tool labkit-go`: a closed loop of Echo or EchoStream
// calls, a CSV row per request message as it completes (go/internal/grpcload), a summary on stderr. Exit status 1
// when no message was answered; on a signal, every answer so far is flushed and the status is the shell's for it.
func grpcLoadCommand(flags *flag.FlagSet, args []string) error {
	var c grpcload.Config
	var grpcOptions repeated
	var payloadFile, duration, timeout, out string
	flags.StringVar(&c.Target, "target", "", "HOST:PORT of an echo server")
	flags.StringVar(&c.RPC, "rpc", "unary", "unary (Echo) or stream (EchoStream, --stream-messages requests a call)")
	flags.IntVar(&c.Concurrency, "concurrency", 1, fmt.Sprintf("calls in flight at once, one per worker (at most %d)", limits.MaxConcurrency))
	flags.IntVar(&c.Connections, "connections", 1, "connections the workers share, worker i on connection i mod N (at most the concurrency)")
	flags.IntVar(&c.StreamMessages, "stream-messages", 10, fmt.Sprintf("requests of each stream call, sent back to back (at most %d)", limits.MaxStreamMessages))
	flags.StringVar(&payloadFile, "payload-file", "", "the bytes every request carries (none: empty requests)")
	flags.StringVar(&duration, "duration", "10s", "how long to start calls"+atMost)
	flags.StringVar(&timeout, "timeout", "20s", "deadline of each call"+atMost)
	flags.IntVar(&c.Dial.KeepaliveMs, "keepalive-ms", 0, fmt.Sprintf("send HTTP/2 keepalive pings this often (at most %d)", limits.MaxKeepaliveMs))
	flags.StringVar(&c.Dial.TLSCA, "tls-ca", "", "PEM root certificate; use TLS")
	flags.StringVar(&c.Dial.TLSServerName, "tls-server-name", "", "name to verify in the server certificate instead of HOST")
	flags.Var(&grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable; e.g. compression=gzip)")
	flags.StringVar(&out, "out", "", "write the CSV here instead of stdout")
	if err := parse(flags, args); err != nil {
		return err
	}
	if c.Dial.KeepaliveMs < 0 || c.Dial.KeepaliveMs > limits.MaxKeepaliveMs {
		return fmt.Errorf("--keepalive-ms: %d is not within 0 to %d", c.Dial.KeepaliveMs, limits.MaxKeepaliveMs)
	}
	var err error
	if c.Duration, err = limits.ParseDuration("duration", duration); err != nil {
		return err
	}
	if c.Timeout, err = limits.ParseDuration("timeout", timeout); err != nil {
		return err
	}
	if payloadFile != "" {
		if c.Payload, err = files.ReadRegular(payloadFile, "payload-file", limits.MaxEchoPayloadBytes); err != nil {
			return err
		}
	}
	if c.Dial.Options, err = options.Parse(grpcOptions, "client"); err != nil {
		return err
	}
	if c.Dial.Options.Pool() != 1 {
		return errors.New("--grpc-option pool: give --connections instead")
	}
	if err := c.Check(); err != nil {
		return err
	}
	writer, closeOut, err := output(out)
	if err != nil {
		return err
	}
	ctx, stoppedBy := stopOnSignal()
	summary, err := grpcload.Run(ctx, c, writer)
	if closeErr := closeOut(); err == nil {
		err = closeErr
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "labkit-go grpc-load: interrupted by %s after %s; every answer so far is in the CSV\n",
			signalName(stoppedBy()), summary)
		os.Exit(128 + int(stoppedBy().(syscall.Signal)))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "labkit-go grpc-load: %s\n", summary)
	if summary.OK == 0 {
		os.Exit(1)
	}
	return nil
}
