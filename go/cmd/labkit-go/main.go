// labkit-go is the Go twin of `labkit echo`: the same subcommands, flags and JSON lines, served and called
// with grpc-go, the implementation the published experiments used; and the services of `labkit hop` and the
// testbed's link emulator. Its commands are the table below; each is flags → one call into go/internal, as
// labkit/cli/ is for labkit. Bad input is one line on stderr and exit status 2, as in labkit's Python CLI.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
)

// The main goroutine keeps the main thread for itself, so no other goroutine ever runs there. The link
// emulator opens each host's TUN device and tap on a goroutine locked to a thread it moves into the host's
// network namespace, a thread Go ends with the goroutine; but the main thread is never ended, only kept
// idle, where it was: once, the emulator's main thread stayed in host a's namespace, `ip netns pids` named
// the emulator a process of host a, and every check for processes left on a host found it.
func init() { runtime.LockOSThread() }

// version is labkit's version, set at build time (-ldflags "-X main.version=...").
var version = "dev"

// command is one subcommand: its name, what runs it (defining its flags on the set it is given), and what
// `labkit-go NAME --help` says of it above the flags.
type command struct {
	name  string
	run   func(flags *flag.FlagSet, args []string) error
	usage string
}

var commands = []command{
	{"serve", serveCommand, "[flags] (the flags of `labkit echo serve`)"},
	{"call", callCommand, "[flags] (the flags of `labkit echo call`)"},
	{"upload-agent", uploadAgentCommand, "[flags] (the flags of `labkit echo upload-agent`)"},
	{"upload-file", uploadFileCommand, "[flags] (the flags of `labkit echo upload-file`)"},
	{"series-agent", seriesAgentCommand, "[flags] (the flags of `labkit echo series-agent`)"},
	{"back", backCommand, "[flags] (the back service of `labkit hop`)"},
	{"front", frontCommand, "[flags] (the front service of `labkit hop`)"},
	{"grpc-load", grpcLoadCommand, "[flags] (the gRPC load of `labkit load --grpc-tool labkit-go`: every message timed)"},
	{"dead-peer", deadPeerCommand, "[flags] (how long a grpc-go client takes to notice a server silently gone)"},
	{"load", loadCommand, "[flags] (the closed-loop load of `labkit hop --tool labkit-go`)"},
	{"link", linkCommand, "--config FILE (the testbed's link emulator; labkit testbed up starts it)"},
}

func main() {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	if len(os.Args) < 2 || os.Args[1] == "--help" || os.Args[1] == "-h" {
		fmt.Fprintf(os.Stderr, "usage: labkit-go {%s} [flags]; labkit-go COMMAND --help for its flags\n", strings.Join(names, "|"))
		os.Exit(2)
	}
	if os.Args[1] == "--version" {
		fmt.Println(version)
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			c.execute(os.Args[2:])
			return
		}
	}
	fail(fmt.Errorf("no command %q in labkit-go (commands: %s)", os.Args[1], strings.Join(names, ", ")))
}

// execute runs the command on its own flag set; --help prints its usage and flags, any error is one line and exit 2.
func (c command) execute(args []string) {
	flags := flag.NewFlagSet(c.name, flag.ContinueOnError)
	flags.SetOutput(io.Discard) // a bad flag comes back as one line (see fail), not the usage
	err := c.run(flags, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "usage: labkit-go %s %s\n", c.name, c.usage)
		flags.SetOutput(os.Stderr)
		flags.PrintDefaults()
		os.Exit(0)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "labkit-go %s: %v\n", os.Args[1], err)
	os.Exit(2)
}

// parse reads the command's flags; a bad one is a one-line error, and positional arguments are refused.
func parse(flags *flag.FlagSet, args []string) error {
	if err := flags.Parse(args); err != nil {
		return err // flag.ErrHelp, or the one line of a bad flag
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flags.Arg(0))
	}
	return nil
}

// givenFlags are the flags set on the command line, for the checks a default value cannot tell apart
// (Python's `--keepalive-ms 0` is refused, while leaving it out is fine).
func givenFlags(flags *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// printJSON writes one JSON line on stdout (a ready line, a file's facts).
func printJSON(line map[string]any) error {
	text, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = fmt.Println(string(text))
	return err
}

// notifyStop delivers SIGTERM and SIGINT. Notify also takes SIGINT back from a shell that started labkit-go in
// the background with it ignored (Go leaves an ignored SIGINT ignored until then).
func notifyStop() <-chan os.Signal {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	return signals
}

// exitOnSignal makes SIGINT and SIGTERM end the process at once with the shell's status for them, 128 + the
// signal, for the commands that hold nothing to clean up.
func exitOnSignal(command string) {
	signals := notifyStop()
	go func() {
		sig := (<-signals).(syscall.Signal)
		fmt.Fprintf(os.Stderr, "labkit-go %s: interrupted (%v)\n", command, sig)
		os.Exit(128 + int(sig))
	}()
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// repeated collects a repeatable flag (--grpc-option KEY=VALUE ...).
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }
