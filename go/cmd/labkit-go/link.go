package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"labkit/go/internal/linkpath"
)

// linkCommand is the testbed's link emulator (`labkit testbed up` starts it): it creates a TUN
// device in every host's namespace and carries packets between them through the link model.
// SIGHUP re-reads the config (new parameters and schedules, same hosts); SIGTERM stops it.
func linkCommand(flags *flag.FlagSet, args []string) error {
	config := flags.String("config", "", "the emulator's config (STATE/link.json, written by labkit testbed up)")
	if err := parse(flags, args); err != nil {
		return err
	}
	if *config == "" {
		return fmt.Errorf("--config is required")
	}
	cfg, err := linkpath.LoadConfig(*config)
	if err != nil {
		return err
	}
	// Packets are recycled through pools and the model's queues reuse their slices, so the heap
	// hardly grows: collect only near a limit. A collection stops every thread, the real-time
	// ones included, for as long as its coordinator (a normal thread) waits for a CPU.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(2 << 30)
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	emulator, err := linkpath.Start(cfg)
	if err != nil {
		return err
	}
	if err := printJSON(map[string]any{"event": "ready", "pid": os.Getpid()}); err != nil {
		emulator.Close()
		return err
	}
	for sig := range signals {
		if sig != syscall.SIGHUP {
			break
		}
		next, err := linkpath.LoadConfig(*config)
		if err == nil {
			err = emulator.Reload(next)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "labkit-go link: reload refused: %v\n", err)
			emulator.RefuseReload(err)
		}
	}
	emulator.Close()
	return nil
}
