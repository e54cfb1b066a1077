package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"labkit/go/internal/call"
	"labkit/go/internal/limits"
)

// atMost is the bound every duration flag's help states.
var atMost = fmt.Sprintf(" (at most %s)", limits.DurationText(limits.MaxDuration))

// callCommand is `labkit echo call`: timed Echo calls (go/internal/call), one JSON line each on stdout and a
// summary on stderr. Exit status 1 when every recorded call failed; on a signal, the shell's status for it.
func callCommand(flags *flag.FlagSet, args []string) error {
	var c call.Config
	var grpcOptions repeated
	flags.StringVar(&c.Target, "target", "", "HOST:PORT of an echo server")
	flags.StringVar(&c.Sizes, "sizes", "", fmt.Sprintf("comma-separated request sizes in bytes, e.g. 1000,14000,16k (each at most %d)", limits.MaxRequestBytes))
	flags.IntVar(&c.Repeats, "repeats", 10, fmt.Sprintf("calls per size (at most %d)", limits.MaxRepeats))
	flags.StringVar(&c.Gap, "gap", "1s", "idle time between the end of one call and the start of the next"+atMost)
	flags.StringVar(&c.BackgroundGap, "background-gap", "", "also send a 1-byte call on the same channel this often (not recorded)"+atMost)
	flags.BoolVar(&c.Cold, "cold", false, "open a new channel (connection) for every call")
	flags.IntVar(&c.Warmup, "warmup", 0, fmt.Sprintf("unrecorded calls first (at most %d)", limits.MaxWarmup))
	flags.Func("seed", "seed of the payload bytes and of --order shuffled", func(v string) error {
		_, err := fmt.Sscan(v, &c.Seed)
		c.Seeded = true
		return err
	})
	flags.StringVar(&c.Order, "order", "sequential", "sequential or shuffled")
	flags.IntVar(&c.KeepaliveMs, "keepalive-ms", 0, fmt.Sprintf("send HTTP/2 keepalive pings this often, also between calls (at most %d)", limits.MaxKeepaliveMs))
	flags.BoolVar(&c.TCPInfo, "tcp-info", false, "add the connection's TCP state (TCP_INFO) before and after each call")
	flags.StringVar(&c.Timeout, "timeout", "30s", "deadline of each call"+atMost)
	flags.StringVar(&c.TLSCA, "tls-ca", "", "PEM root certificate; use TLS")
	flags.StringVar(&c.TLSServerName, "tls-server-name", "", "name to verify in the server certificate instead of HOST")
	flags.Var(&grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable)")
	if err := parse(flags, args); err != nil {
		return err
	}
	c.GRPCOptions, c.Given = grpcOptions, givenFlags(flags)
	plan, err := call.NewPlan(c)
	if err != nil {
		return err
	}
	ctx, stoppedBy := stopOnSignal()
	summary, err := plan.Run(ctx, os.Stdout)
	if errors.Is(err, context.Canceled) {
		// As Python's client on a signal: the summary, and the shell's status, 130 for SIGINT, 143 for SIGTERM.
		fmt.Fprintf(os.Stderr, "labkit-go call: interrupted after %s\n", summary)
		os.Exit(128 + int(stoppedBy().(syscall.Signal)))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "labkit-go call: %s\n", summary)
	if summary.NothingMeasured() {
		os.Exit(1)
	}
	return nil
}

// stopOnSignal is a context cancelled by the first SIGINT or SIGTERM, and the signal that cancelled it.
func stopOnSignal() (context.Context, func() os.Signal) {
	signals := notifyStop()
	ctx, cancel := context.WithCancel(context.Background())
	var received atomic.Value
	go func() {
		received.Store(<-signals)
		cancel()
	}()
	return ctx, func() os.Signal { sig, _ := received.Load().(os.Signal); return sig }
}
