package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"

	"labkit/go/internal/deadpeer"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
)

// deadPeerCommand is how long a grpc-go client takes to notice a server silently gone (go/internal/deadpeer): a
// ready line once a stream is held open, then a noticed or not_noticed line. Exit status 1 when the server could
// not be reached at all; on a signal, at once, the shell's status for it.
func deadPeerCommand(flags *flag.FlagSet, args []string) error {
	var c deadpeer.Config
	var grpcOptions repeated
	var wait, timeout, probeEvery string
	flags.StringVar(&c.Target, "target", "", "HOST:PORT of an echo server")
	flags.StringVar(&wait, "wait", "60s", "how long to wait, after the ready line, for the client to notice"+atMost)
	flags.StringVar(&timeout, "timeout", "20s", "deadline of the first Echo, of the stream's first answer and of each probe"+atMost)
	flags.StringVar(&probeEvery, "probe-every", "0s", "also make one Echo this often on the same connection (0s: none)"+atMost)
	flags.Var(&grpcOptions, "grpc-option", "a gRPC knob by its grpc-go name, KEY=VALUE (repeatable; e.g. keepalive-time=10s)")
	if err := parse(flags, args); err != nil {
		return err
	}
	var err error
	if c.Wait, err = limits.ParseDuration("wait", wait); err != nil {
		return err
	}
	if c.Timeout, err = limits.ParseDuration("timeout", timeout); err != nil {
		return err
	}
	if c.ProbeEvery, err = limits.ParseDuration("probe-every", probeEvery); err != nil {
		return err
	}
	if c.Dial.Options, err = options.Parse(grpcOptions, "client"); err != nil {
		return err
	}
	if c.Dial.Options.Pool() != 1 {
		return errors.New("--grpc-option pool: the measurement holds one connection")
	}
	if _, err := c.Dial.DialOptions(); err != nil {
		return err // a keepalive-time grpc-go would raise, before anything connects
	}
	if err := c.Check(); err != nil {
		return err
	}
	ctx, stoppedBy := stopOnSignal()
	err = deadpeer.Run(ctx, c, printJSON)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "labkit-go dead-peer: interrupted")
		os.Exit(128 + int(stoppedBy().(syscall.Signal)))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "labkit-go dead-peer: %v\n", err)
		os.Exit(1)
	}
	return nil
}
