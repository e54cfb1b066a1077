package hop

// What `labkit-go back` and `labkit-go front` run: their flags checked, every endpoint listening, and the ready
// line (for the front, once one call over every relay returned the back's body).

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"

	"labkit/go/internal/address"
	"labkit/go/internal/files"
	"labkit/go/internal/limits"
	"labkit/go/internal/reason"
)

// Service is a service of `labkit hop` listening: its ready line, and how to stop it.
type Service struct {
	Ready map[string]any
	stop  func()
}

// Stop stops every endpoint, giving requests in flight the service's grace.
func (s *Service) Stop() { s.stop() }

// BackConfig is what `labkit-go back` is told, durations as written.
type BackConfig struct {
	Bind, BodyFile, TLSCert, TLSKey, NATSURL, NATSSubject, Grace string
	GRPCPort, TLSPort, NATSWorkers                               int
	Given                                                        map[string]bool // flags set on the command line
	Version                                                      string          // labkit's, for the ready line
}

// StartBack checks c and serves the body on every endpoint c asks for.
func StartBack(c BackConfig) (*Service, error) {
	host, err := address.Bind(c.Bind)
	if err != nil {
		return nil, err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	for _, port := range []struct {
		name  string
		value int
	}{{"grpc-port", c.GRPCPort}, {"tls-port", c.TLSPort}} {
		if err := address.CheckPort(port.name, port.value, 0); err != nil {
			return nil, err
		}
	}
	if c.NATSWorkers < 1 || c.NATSWorkers > limits.MaxNATSWorkers {
		return nil, fmt.Errorf("--nats-workers must be between 1 and %d, not %d", limits.MaxNATSWorkers, c.NATSWorkers)
	}
	if c.Given["nats-subject"] && c.NATSURL == "" {
		return nil, fmt.Errorf("--nats-subject needs --nats-url")
	}
	grace, err := limits.ParseDuration("grace", c.Grace)
	if err != nil {
		return nil, err
	}
	body := DefaultBody()
	if c.BodyFile != "" {
		if body, err = files.ReadRegular(c.BodyFile, "body-file", limits.MaxBodyBytes); err != nil {
			return nil, err
		}
	}
	back, err := NewBack(body)
	if err != nil {
		return nil, err
	}
	service := &Service{Ready: map[string]any{"event": "ready", "role": "back", "bind": c.Bind, "pid": os.Getpid(),
		"body_bytes": len(body), "body_sha256": sha256Hex(body)}, stop: func() { back.Close(grace) }}
	if err := service.serveBack(back, c, host); err != nil {
		service.Stop()
		return nil, err
	}
	service.addVersions(c.Version)
	return service, nil
}

func (s *Service) serveBack(back *Back, c BackConfig, host string) error {
	var err error
	if s.Ready["http_port"], err = back.ServeHTTP(c.Bind); err != nil {
		return fmt.Errorf("cannot listen on %s: %v", c.Bind, reason.Of(err))
	}
	if s.Ready["grpc_port"], err = back.ServeGRPC(net.JoinHostPort(host, fmt.Sprint(c.GRPCPort))); err != nil {
		return fmt.Errorf("cannot serve gRPC on %s port %d: %v", host, c.GRPCPort, reason.Of(err))
	}
	if c.TLSCert != "" {
		config, err := files.ServerTLS(c.TLSCert, c.TLSKey)
		if err != nil {
			return err
		}
		if s.Ready["tls_port"], err = back.ServeTLS(net.JoinHostPort(host, fmt.Sprint(c.TLSPort)), config); err != nil {
			return fmt.Errorf("cannot serve TLS on %s port %d: %v", host, c.TLSPort, reason.Of(err))
		}
	}
	if c.NATSURL != "" {
		if err := back.ServeNATS(c.NATSURL, c.NATSSubject, c.NATSWorkers); err != nil {
			return fmt.Errorf("cannot answer on NATS at %s: %v", c.NATSURL, err)
		}
		s.Ready["nats_url"], s.Ready["nats_subject"], s.Ready["nats_workers"] = c.NATSURL, c.NATSSubject, c.NATSWorkers
	}
	return nil
}

// FrontConfig is what `labkit-go front` is told, durations as written.
type FrontConfig struct {
	Bind, BackGRPC, BackHTTP2, BackHTTP2TLS, BackCA, NATSURL, NATSSubject, Timeout, Grace string
	GRPCPort, GRPCChannels                                                                int
	Version                                                                               string // labkit's, for the ready line
}

// StartFront checks c, makes one call over every relay (the connections are up, and every relay returns the
// same body, whose hash the ready line carries for the harness to compare), then listens.
func StartFront(c FrontConfig) (*Service, error) {
	host, err := address.Bind(c.Bind)
	if err != nil {
		return nil, err
	}
	if err := address.CheckPort("grpc-port", c.GRPCPort, 0); err != nil {
		return nil, err
	}
	if c.GRPCChannels < 1 || c.GRPCChannels > limits.MaxGRPCChannels {
		return nil, fmt.Errorf("--grpc-channels must be between 1 and %d, not %d", limits.MaxGRPCChannels, c.GRPCChannels)
	}
	if (c.BackHTTP2TLS == "") != (c.BackCA == "") {
		return nil, fmt.Errorf("--back-http2-tls and --back-ca go together")
	}
	timeout, err := limits.ParseDuration("timeout", c.Timeout)
	if err != nil || timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be a positive duration of at most %s, not %q", limits.DurationText(limits.MaxDuration), c.Timeout)
	}
	grace, err := limits.ParseDuration("grace", c.Grace)
	if err != nil {
		return nil, err
	}
	front := &Front{Relays: map[string]Relay{}, Timeout: timeout}
	service := &Service{Ready: map[string]any{"event": "ready", "role": "front", "bind": c.Bind, "pid": os.Getpid(),
		"grpc_channels": c.GRPCChannels}, stop: func() { front.Close(grace) }}
	if err := c.addRelays(front); err != nil {
		front.Close(0)
		return nil, err
	}
	if err := service.serveFront(front, c, host); err != nil {
		service.Stop()
		return nil, err
	}
	service.addVersions(c.Version)
	return service, nil
}

// addRelays gives front a relay per transport c names (none connected yet).
func (c FrontConfig) addRelays(front *Front) error {
	add := func(name string, relay Relay, err error) error {
		if err != nil {
			return fmt.Errorf("--back-%s: %v", name, err)
		}
		front.Relays[name] = relay
		return nil
	}
	if c.BackGRPC != "" {
		if _, _, err := address.Parse(c.BackGRPC, false); err != nil {
			return fmt.Errorf("--back-grpc: %v", err)
		}
		relay, err := NewGRPCRelay(c.BackGRPC, c.GRPCChannels)
		if err := add("grpc", relay, err); err != nil {
			return err
		}
	}
	if c.BackHTTP2 != "" {
		relay, err := NewHTTP2Relay(c.BackHTTP2, nil)
		if err := add("http2", relay, err); err != nil {
			return err
		}
	}
	if c.BackHTTP2TLS != "" {
		roots, err := files.Roots(c.BackCA, "back-ca")
		if err != nil {
			return err
		}
		if roots == nil {
			return fmt.Errorf("--back-ca %s holds no PEM certificate", c.BackCA)
		}
		relay, err := NewHTTP2Relay(c.BackHTTP2TLS, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err := add("http2-tls", relay, err); err != nil {
			return err
		}
	}
	if c.NATSURL != "" {
		relay, err := NewNATSRelay(c.NATSURL, c.NATSSubject)
		if err != nil {
			return fmt.Errorf("cannot connect to NATS at %s: %v", c.NATSURL, err)
		}
		front.Relays["nats"] = relay
	}
	if len(front.Relays) == 0 {
		return fmt.Errorf("give at least one of --back-grpc, --back-http2, --back-http2-tls, --nats-url")
	}
	return nil
}

func (s *Service) serveFront(front *Front, c FrontConfig, host string) error {
	sums := map[string]string{}
	for name := range front.Relays {
		body, err := front.Fetch(context.Background(), name)
		if err != nil {
			return fmt.Errorf("the first call over %s failed: %v", name, err)
		}
		sums[name] = sha256Hex(body)
		s.Ready["body_bytes"] = len(body)
	}
	var via []string
	for _, name := range []string{"grpc", "http2", "http2-tls", "nats"} {
		if _, ok := sums[name]; ok {
			via = append(via, name)
		}
	}
	s.Ready["via"], s.Ready["body_sha256"] = via, sums
	var err error
	if s.Ready["http_port"], err = front.ServeHTTP(c.Bind); err != nil {
		return fmt.Errorf("cannot listen on %s: %v", c.Bind, reason.Of(err))
	}
	if s.Ready["grpc_port"], err = front.ServeGRPC(net.JoinHostPort(host, fmt.Sprint(c.GRPCPort))); err != nil {
		return fmt.Errorf("cannot serve gRPC on %s port %d: %v", host, c.GRPCPort, reason.Of(err))
	}
	return nil
}

// addVersions puts in the ready line the versions every service reports.
func (s *Service) addVersions(labkit string) {
	s.Ready["labkit_version"], s.Ready["grpc_go_version"], s.Ready["go_version"] = labkit, grpc.Version, runtime.Version()
	s.Ready["nats_go_version"] = nats.Version
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
