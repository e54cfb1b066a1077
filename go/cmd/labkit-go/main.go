// labkit-go is the Go twin of `labkit echo`: the same subcommands, flags and JSON lines,
// served and called with grpc-go, the implementation the published experiments used.
//
//	labkit-go serve --bind HOST:PORT [...]   the echo server (see `labkit echo serve --help`)
//	labkit-go call --target HOST:PORT ...    timed Echo calls, one JSON line each
//	labkit-go upload-agent, upload-file      the client side of `labkit upload`
//	labkit-go series-agent                   the client side of `labkit series`
//	labkit-go back, front                    the back service and the front relay of `labkit hop`
//	labkit-go link --config FILE             the testbed's link emulator (started by `labkit testbed up`)
//
// Bad input is one line on stderr and exit status 2, as in labkit's Python CLI.
package main

import (
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

var commands = map[string]func(args []string) error{
	"serve":        serve,
	"call":         call,
	"upload-agent": uploadAgentCommand,
	"series-agent": seriesAgentCommand,
	"upload-file":  uploadFileCommand,
	"back":         backCommand,
	"front":        frontCommand,
	"link":         linkCommand,
}

// usageError is bad input: one line, exit status 2.
type usageError struct{ message string }

func (e usageError) Error() string { return e.message }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	if len(os.Args) < 2 || os.Args[1] == "--help" || os.Args[1] == "-h" {
		fmt.Fprintf(os.Stderr, "usage: labkit-go {%s} [flags]; labkit-go COMMAND --help for its flags\n", strings.Join(names(), "|"))
		os.Exit(2)
	}
	if os.Args[1] == "--version" {
		fmt.Println(version)
		return
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fail(usagef("no command %q in labkit-go (commands: %s)", os.Args[1], strings.Join(names(), ", ")))
	}
	if err := run(os.Args[2:]); err != nil {
		fail(err)
	}
}

func names() []string {
	return []string{"serve", "call", "upload-agent", "upload-file", "series-agent", "back", "front", "link"}
}

func fail(err error) {
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "labkit-go %s: %v\n", os.Args[1], err)
	os.Exit(2)
}

// newFlags is a flag set whose errors come back as one-line usage errors instead of printing usage.
func newFlags(name string) *flag.FlagSet {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.SetOutput(io.Discard) // errors come back as one line (see parse); --help prints the usage itself
	return flags
}

func parse(flags *flag.FlagSet, args []string) error {
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if flags.Name() == "link" {
				fmt.Fprintln(os.Stderr, "usage: labkit-go link --config FILE (the testbed's link emulator; labkit testbed up starts it)")
			} else if flags.Name() == "back" || flags.Name() == "front" { // labkit-go's own: no Python twin
				fmt.Fprintf(os.Stderr, "usage: labkit-go %s [flags] (the %s service of `labkit hop`)\n", flags.Name(), flags.Name())
			} else {
				fmt.Fprintf(os.Stderr, "usage: labkit-go %s [flags] (the flags of `labkit echo %s`)\n", flags.Name(), flags.Name())
			}
			flags.SetOutput(os.Stderr)
			flags.PrintDefaults()
			return err
		}
		return usageError{err.Error()}
	}
	if flags.NArg() > 0 {
		return usagef("unexpected argument %q", flags.Arg(0))
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

// exitOnSignal makes SIGINT and SIGTERM end the process at once with the shell's status for them, 128 + the
// signal, for the commands that hold nothing to clean up. Notify also takes SIGINT back from a shell that
// started labkit-go in the background with it ignored (Go leaves an ignored SIGINT ignored until then).
func exitOnSignal(command string) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := (<-signals).(syscall.Signal)
		fmt.Fprintf(os.Stderr, "labkit-go %s: interrupted (%v)\n", command, sig)
		os.Exit(128 + int(sig))
	}()
}

// repeated collects a repeatable flag (--grpc-option KEY=VALUE ...).
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }
