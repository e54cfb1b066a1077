package main

import (
	"time"

	"google.golang.org/grpc/keepalive"
)

// keepaliveEnforcement accepts client pings every ms milliseconds, also between calls, as the Python
// server's --permit-keepalive-ms (grpc-go's default answers frequent pings with GOAWAY).
func keepaliveEnforcement(ms int) keepalive.EnforcementPolicy {
	return keepalive.EnforcementPolicy{MinTime: time.Duration(ms) * time.Millisecond, PermitWithoutStream: true}
}
