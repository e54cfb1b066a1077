package main

// `labkit-go back` and `labkit-go front`: the two services of `labkit hop` (see labkit/go/internal/hop).
// Each prints one JSON ready line once every endpoint listens (and, for the front, once one call
// over every relay returned the back's body), and stops gracefully on SIGTERM or SIGINT.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"

	"labkit/go/internal/address"
	"labkit/go/internal/files"
	"labkit/go/internal/hop"
	"labkit/go/internal/limits"
	"labkit/go/internal/reason"
)

type backFlags struct {
	bind, bodyFile, tlsCert, tlsKey, natsURL, natsSubject, grace string
	grpcPort, tlsPort, natsWorkers                               int
	given                                                        map[string]bool
}

func backCommand(flags *flag.FlagSet, args []string) error {
	var f backFlags
	flags.StringVar(&f.bind, "bind", "", "HOST:PORT of the HTTP/1.1 and h2c endpoint (GET /products); port 0 picks a free port")
	flags.IntVar(&f.grpcPort, "grpc-port", 0, "port of the gRPC endpoint (BackService.Get) on the --bind host (0: a free one)")
	flags.StringVar(&f.bodyFile, "body-file", "", "answer this file's bytes (at most 1 MiB) [default: a 257-byte JSON product list]")
	flags.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate chain: also serve HTTP/2 and HTTP/1.1 over TLS on --tls-port")
	flags.StringVar(&f.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	flags.IntVar(&f.tlsPort, "tls-port", 0, "port of the TLS endpoint (0: a free one)")
	flags.StringVar(&f.natsURL, "nats-url", "", "also answer NATS requests, from the server at nats://HOST:PORT")
	flags.StringVar(&f.natsSubject, "nats-subject", hop.DefaultSubject, "the subject to answer on")
	flags.IntVar(&f.natsWorkers, "nats-workers", 1, "NATS subscriptions answering at once (one queue group)")
	flags.StringVar(&f.grace, "grace", "2s", "time requests in flight get to finish on stop"+atMost)
	if err := parse(flags, args); err != nil {
		return err
	}
	f.given = givenFlags(flags)
	return f.run()
}

func (f *backFlags) check() (host string, grace time.Duration, body []byte, err error) {
	if host, err = bindHost(f.bind); err != nil {
		return "", 0, nil, err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return "", 0, nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	for name, port := range map[string]int{"grpc-port": f.grpcPort, "tls-port": f.tlsPort} {
		if port < 0 || port > 65535 {
			return "", 0, nil, fmt.Errorf("--%s %d is out of range [0, 65535]", name, port)
		}
	}
	if f.natsWorkers < 1 || f.natsWorkers > 1024 {
		return "", 0, nil, fmt.Errorf("--nats-workers must be between 1 and 1024, not %d", f.natsWorkers)
	}
	if f.given["nats-subject"] && f.natsURL == "" {
		return "", 0, nil, fmt.Errorf("--nats-subject needs --nats-url")
	}
	if grace, err = limits.ParseDuration("grace", f.grace); err != nil {
		return "", 0, nil, err
	}
	body, err = readBody(f.bodyFile)
	return host, grace, body, err
}

func (f *backFlags) run() error {
	host, grace, body, err := f.check()
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	back, err := hop.NewBack(body)
	if err != nil {
		return err
	}
	defer back.Close(grace)
	ready := map[string]any{"event": "ready", "role": "back", "bind": f.bind, "pid": os.Getpid(),
		"body_bytes": len(body), "body_sha256": sha256Hex(body), "nats_go_version": nats.Version}
	if ready["http_port"], err = back.ServeHTTP(f.bind); err != nil {
		return fmt.Errorf("cannot listen on %s: %v", f.bind, reason.Of(err))
	}
	if ready["grpc_port"], err = back.ServeGRPC(net.JoinHostPort(host, fmt.Sprint(f.grpcPort))); err != nil {
		return fmt.Errorf("cannot serve gRPC on %s port %d: %v", host, f.grpcPort, reason.Of(err))
	}
	if f.tlsCert != "" {
		pair, err := files.KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return err
		}
		config := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if ready["tls_port"], err = back.ServeTLS(net.JoinHostPort(host, fmt.Sprint(f.tlsPort)), config); err != nil {
			return fmt.Errorf("cannot serve TLS on %s port %d: %v", host, f.tlsPort, reason.Of(err))
		}
	}
	if f.natsURL != "" {
		if err := back.ServeNATS(f.natsURL, f.natsSubject, f.natsWorkers); err != nil {
			return fmt.Errorf("cannot answer on NATS at %s: %v", f.natsURL, err)
		}
		ready["nats_url"], ready["nats_subject"], ready["nats_workers"] = f.natsURL, f.natsSubject, f.natsWorkers
	}
	return serveUntilStopped("back", ready, stop)
}

type frontFlags struct {
	bind, backGRPC, backHTTP2, backHTTP2TLS, backCA, natsURL, natsSubject, timeout, grace string
	grpcPort, grpcChannels                                                                int
}

func frontCommand(flags *flag.FlagSet, args []string) error {
	var f frontFlags
	flags.StringVar(&f.bind, "bind", "", "HOST:PORT of the HTTP/1.1 endpoint (GET /via/<transport>); port 0 picks a free port")
	flags.IntVar(&f.grpcPort, "grpc-port", 0, "port of the gRPC endpoint (BackService.Get{via}) on the --bind host (0: a free one)")
	flags.StringVar(&f.backGRPC, "back-grpc", "", "relay /via/grpc to the back's gRPC endpoint at HOST:PORT")
	flags.IntVar(&f.grpcChannels, "grpc-channels", 1, "gRPC channels (connections) to the back, used round robin")
	flags.StringVar(&f.backHTTP2, "back-http2", "", "relay /via/http2 over one h2c connection to http://HOST:PORT")
	flags.StringVar(&f.backHTTP2TLS, "back-http2-tls", "", "relay /via/http2-tls over one TLS connection to https://HOST:PORT")
	flags.StringVar(&f.backCA, "back-ca", "", "PEM CA certificate that signed the back's TLS certificate")
	flags.StringVar(&f.natsURL, "nats-url", "", "relay /via/nats as requests through the NATS server at nats://HOST:PORT")
	flags.StringVar(&f.natsSubject, "nats-subject", hop.DefaultSubject, "the subject the back answers on")
	flags.StringVar(&f.timeout, "timeout", "5s", "deadline of each relayed call (then 502)"+atMost)
	flags.StringVar(&f.grace, "grace", "2s", "time requests in flight get to finish on stop"+atMost)
	if err := parse(flags, args); err != nil {
		return err
	}
	return f.run()
}

// check returns the front with a relay per transport given (none connected yet).
func (f *frontFlags) check() (host string, timeout, grace time.Duration, front *hop.Front, err error) {
	if host, err = bindHost(f.bind); err != nil {
		return "", 0, 0, nil, err
	}
	if f.grpcPort < 0 || f.grpcPort > 65535 {
		return "", 0, 0, nil, fmt.Errorf("--grpc-port %d is out of range [0, 65535]", f.grpcPort)
	}
	if f.grpcChannels < 1 || f.grpcChannels > 256 {
		return "", 0, 0, nil, fmt.Errorf("--grpc-channels must be between 1 and 256, not %d", f.grpcChannels)
	}
	if (f.backHTTP2TLS == "") != (f.backCA == "") {
		return "", 0, 0, nil, fmt.Errorf("--back-http2-tls and --back-ca go together")
	}
	if timeout, err = limits.ParseDuration("timeout", f.timeout); err != nil || timeout <= 0 {
		return "", 0, 0, nil, fmt.Errorf("--timeout must be a positive duration of at most %s, not %q", limits.DurationText(limits.MaxDuration), f.timeout)
	}
	if grace, err = limits.ParseDuration("grace", f.grace); err != nil {
		return "", 0, 0, nil, err
	}
	front, err = f.relays(timeout)
	return host, timeout, grace, front, err
}

func (f *frontFlags) relays(timeout time.Duration) (*hop.Front, error) {
	front := &hop.Front{Relays: map[string]hop.Relay{}, Timeout: timeout}
	add := func(name string, relay hop.Relay, err error) error {
		if err != nil {
			front.Close(0)
			return fmt.Errorf("--back-%s: %v", name, err)
		}
		front.Relays[name] = relay
		return nil
	}
	if f.backGRPC != "" {
		if _, _, err := address.Parse(f.backGRPC, false); err != nil {
			return nil, fmt.Errorf("--back-grpc: %v", err)
		}
		relay, err := hop.NewGRPCRelay(f.backGRPC, f.grpcChannels)
		if err := add("grpc", relay, err); err != nil {
			return nil, err
		}
	}
	if f.backHTTP2 != "" {
		relay, err := hop.NewHTTP2Relay(f.backHTTP2, nil)
		if err := add("http2", relay, err); err != nil {
			return nil, err
		}
	}
	if f.backHTTP2TLS != "" {
		config, err := caConfig(f.backCA)
		if err != nil {
			front.Close(0)
			return nil, err
		}
		relay, err := hop.NewHTTP2Relay(f.backHTTP2TLS, config)
		if err := add("http2-tls", relay, err); err != nil {
			return nil, err
		}
	}
	if f.natsURL != "" {
		relay, err := hop.NewNATSRelay(f.natsURL, f.natsSubject)
		if err != nil {
			front.Close(0)
			return nil, fmt.Errorf("cannot connect to NATS at %s: %v", f.natsURL, err)
		}
		front.Relays["nats"] = relay
	}
	if len(front.Relays) == 0 {
		return nil, fmt.Errorf("give at least one of --back-grpc, --back-http2, --back-http2-tls, --nats-url")
	}
	return front, nil
}

func (f *frontFlags) run() error {
	host, _, grace, front, err := f.check()
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer front.Close(grace)
	ready := map[string]any{"event": "ready", "role": "front", "bind": f.bind, "pid": os.Getpid(),
		"grpc_channels": f.grpcChannels, "nats_go_version": nats.Version}
	// One call over every relay before the ready line: the connections are up, and every relay
	// returns the same body (whose hash the ready line carries, for the harness to compare).
	sums := map[string]string{}
	for name := range front.Relays {
		body, err := front.Fetch(context.Background(), name)
		if err != nil {
			return fmt.Errorf("the first call over %s failed: %v", name, err)
		}
		sums[name] = sha256Hex(body)
		ready["body_bytes"] = len(body)
	}
	ready["via"], ready["body_sha256"] = sortedKeys(sums), sums
	if ready["http_port"], err = front.ServeHTTP(f.bind); err != nil {
		return fmt.Errorf("cannot listen on %s: %v", f.bind, reason.Of(err))
	}
	if ready["grpc_port"], err = front.ServeGRPC(net.JoinHostPort(host, fmt.Sprint(f.grpcPort))); err != nil {
		return fmt.Errorf("cannot serve gRPC on %s port %d: %v", host, f.grpcPort, reason.Of(err))
	}
	return serveUntilStopped("front", ready, stop)
}

// serveUntilStopped prints the ready line (with the versions every service reports) and waits for a signal.
func serveUntilStopped(name string, ready map[string]any, stop chan os.Signal) error {
	ready["labkit_version"], ready["grpc_go_version"], ready["go_version"] = version, grpc.Version, runtime.Version()
	started := time.Now()
	line, _ := json.Marshal(ready)
	fmt.Println(string(line))
	received := <-stop
	fmt.Fprintf(os.Stderr, "labkit-go %s: stopped on %s after %.1f s\n", name, signalName(received), time.Since(started).Seconds())
	return nil
}

// bindHost checks --bind as `serve` does and returns its host, unbracketed for net.JoinHostPort.
func bindHost(bind string) (string, error) {
	if bind == "" {
		return "", fmt.Errorf("--bind HOST:PORT is required")
	}
	host, _, err := address.Parse(bind, true)
	if err != nil {
		return "", fmt.Errorf("--bind: %v", err)
	}
	return strings.Trim(host, "[]"), nil
}

func readBody(path string) ([]byte, error) {
	if path == "" {
		return hop.DefaultBody(), nil
	}
	return files.ReadRegular(path, "body-file", hop.MaxBodyBytes) // the bound of one NATS message
}

func caConfig(path string) (*tls.Config, error) {
	pem, err := files.ReadRegular(path, "back-ca", limits.MaxPEMBytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--back-ca %s holds no PEM certificate", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for _, name := range []string{"grpc", "http2", "http2-tls", "nats"} {
		if _, ok := m[name]; ok {
			keys = append(keys, name)
		}
	}
	return keys
}
