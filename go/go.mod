module labkit/go

go 1.26.0

require (
	github.com/nats-io/nats.go v1.55.0
	// v0.6.0's protoc-gen-go-vtproto (scripts/bootstrap.sh) writes echopb/echo_vtproto.pb.go; grpc v1.85.0 requires
	// this later commit, which minimal version selection takes (its protohelpers are v0.6.0's, unchanged).
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)
