// Package limits holds the largest count, duration and size labkit-go accepts from a user: the same numbers
// as Python's labkit/limits.py (tests/test_limits.py compares the two), so a flag refused by `labkit echo`
// is refused by its labkit-go twin.
package limits

import (
	"fmt"
	"time"

	"labkit/go/internal/units"
)

const (
	// MaxRequestBytes bounds one echo request.
	MaxRequestBytes = 1 << 30
	// MaxMessageBytes bounds the message size a server accepts: gRPC's own limit (a signed 32-bit length).
	MaxMessageBytes = 2_147_483_647 // 1<<31 - 1, written out: Go and Python read 1<<31 - 1 differently
	// MaxFileBytes bounds the file of upload-agent and upload-file (the agent holds it in memory).
	MaxFileBytes = 1 << 30
	// MaxRepeats bounds the recorded calls per size of call and the uploads of upload-agent.
	MaxRepeats = 1_000_000
	// MaxCalls bounds the recorded calls of one call (sizes × repeats): a shuffled order keeps an index per call.
	MaxCalls = 10_000_000
	// MaxWarmup bounds the unrecorded calls (or uploads) before the first recorded one.
	MaxWarmup = 10_000
	// MaxDuration bounds any gap, interval or per-call deadline: one week.
	MaxDuration = 7 * 24 * time.Hour
	// MaxKeepaliveMs bounds a keepalive ping interval: one hour.
	MaxKeepaliveMs = 3_600_000
	// MaxTicks bounds the ticks of one series agent run.
	MaxTicks = 10_000_000
	// MaxProbeWait bounds the series agent's tick interval and per-probe deadline (a probe spans one tick).
	MaxProbeWait = time.Hour
	// MaxPEMBytes bounds a certificate, key or CA bundle file (the system's whole CA bundle is ~200 KB).
	MaxPEMBytes = 1 << 20
	// MaxBodyBytes bounds the hop back's body: it must fit one NATS message under nats-server's default
	// max_payload (1 MiB) and one gRPC message under grpc-go's default receive limit (4 MiB).
	MaxBodyBytes = 1 << 20
	// MaxConcurrency bounds the requests a load keeps in flight at once (hop's --connections).
	MaxConcurrency = 10_000
	// MaxGRPCChannels bounds the hop front's gRPC channels to the back.
	MaxGRPCChannels = 256
	// MaxNATSWorkers bounds the hop back's NATS subscriptions answering at once.
	MaxNATSWorkers = 1024
	// MaxEchoPayloadBytes bounds an echo call's payload: gRPC's default 4 MiB message bound less room for the
	// framing (written out, as labkit/limits.py derives it).
	MaxEchoPayloadBytes = 4_193_280
	// MaxStreamMessages bounds the requests of one EchoStream call of a load.
	MaxStreamMessages = 100_000
)

// DurationText is a bound as --help and error lines state it, in whole hours: 168h.
func DurationText(d time.Duration) string { return fmt.Sprintf("%dh", int64(d/time.Hour)) }

// ParseDuration reads the duration flag --name of at most MaxDuration, the bound of its Python twin.
func ParseDuration(name, text string) (time.Duration, error) {
	duration, err := units.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("--%s: %v", name, err)
	}
	if duration > MaxDuration {
		return 0, fmt.Errorf("--%s: %q is longer than %s", name, text, DurationText(MaxDuration))
	}
	return duration, nil
}
