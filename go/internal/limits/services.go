package limits

import "time"

// The bounds whose Python twins sit beside the code that reads them (labkit/files.py, the series agent,
// `labkit hop`) rather than in labkit/limits.py; limits.go holds the ones tests/test_limits.py compares.
const (
	// MaxPEMBytes bounds a certificate, key or CA bundle file (the system's whole CA bundle is ~200 KB),
	// as labkit/files.py's MAX_PEM_BYTES.
	MaxPEMBytes = 1 << 20
	// MaxBodyBytes bounds the hop back's body: it must fit one NATS message under nats-server's default
	// max_payload (1 MiB) and one gRPC message under grpc-go's default receive limit (4 MiB).
	MaxBodyBytes = 1 << 20
	// MaxProbeWait bounds the series agent's tick interval and per-probe deadline, as its Python twin.
	MaxProbeWait = time.Hour
	// MaxGRPCChannels bounds the hop front's gRPC channels to the back.
	MaxGRPCChannels = 256
	// MaxNATSWorkers bounds the hop back's NATS subscriptions answering at once.
	MaxNATSWorkers = 1024
)
