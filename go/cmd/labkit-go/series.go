package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"labkit/go/internal/limits"
	"labkit/go/internal/series"
)

// seriesAgentCommand is `labkit echo series-agent` (go/internal/series): the probes of one cell of `labkit
// series`, one JSON line per result. On SIGTERM or SIGINT it stops at once, exit status 143, as its Python twin.
func seriesAgentCommand(flags *flag.FlagSet, args []string) error {
	var c series.Config
	flags.StringVar(&c.Address, "address", "", "the server's data address (ping, gRPC and TCP echo go there)")
	flags.IntVar(&c.GRPCPort, "grpc-port", 0, "port of the gRPC echo service")
	flags.IntVar(&c.TCPEchoPort, "tcp-echo-port", 0, "port of the raw TCP echo")
	flags.StringVar(&c.Probes, "probes", "", "comma-separated: "+strings.Join(series.Probes, ","))
	flags.IntVar(&c.FirstTick, "first-tick", 0, fmt.Sprintf("number of the first tick (at most %d)", limits.MaxTicks))
	flags.IntVar(&c.Ticks, "ticks", 0, fmt.Sprintf("how many ticks to run (at most %d)", limits.MaxTicks))
	flags.StringVar(&c.Interval, "interval", "", "time between ticks")
	flags.IntVar(&c.Payload, "payload-bytes", 50, "payload of the echo probes")
	flags.StringVar(&c.Timeout, "timeout", "5s", "deadline of each call and ping")
	flags.BoolVar(&c.Spread, "spread", true, "spread the probes evenly over each tick")
	flags.BoolVar(&c.Together, "together", false, "send every probe at the tick itself")
	if err := parse(flags, args); err != nil {
		return err
	}
	c.Given = givenFlags(flags)
	agent, err := series.NewAgent(c)
	if err != nil {
		return err
	}
	ctx, _ := stopOnSignal()
	if err := agent.Run(ctx, os.Stdout); errors.Is(err, context.Canceled) {
		os.Exit(143)
	}
	return nil
}
