// Package address reads HOST:PORT as labkit/echo/address.py does, so that labkit-go refuses the
// same --bind and --target values as the Python echo: grpc-go and net.Listen would take ":0" (every
// address) or "host:http" (a service name) and listen or dial somewhere nobody meant.
package address

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A host is a bracketed IPv6 literal, or a name / IPv4 literal without colons.
var pattern = regexp.MustCompile(`^(\[[0-9A-Fa-f:.%\w]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$`)

// Parse splits HOST:PORT (IPv6 as [::1]:PORT) into the host as written and the port; port 0
// ("pick a free port") only when allowPortZero, for a bind address.
func Parse(text string, allowPortZero bool) (string, int, error) {
	m := pattern.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		hint := ""
		if strings.Count(text, ":") > 1 {
			hint = " (write IPv6 addresses in brackets, e.g. [::1]:50051)"
		}
		return "", 0, fmt.Errorf("%q is not HOST:PORT%s", text, hint)
	}
	port, _ := strconv.Atoi(m[2])
	lowest := 1
	if allowPortZero {
		lowest = 0
	}
	if port < lowest || port > 65535 {
		return "", 0, fmt.Errorf("port %d in %q is out of range [%d, 65535]", port, text, lowest)
	}
	return m[1], port, nil
}
