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

// Bind checks --bind as every labkit-go server reads it (given, HOST:PORT, port 0 allowed) and returns its host,
// unbracketed for net.JoinHostPort.
func Bind(text string) (string, error) {
	if text == "" {
		return "", fmt.Errorf("--bind HOST:PORT is required")
	}
	host, _, err := Parse(text, true)
	if err != nil {
		return "", fmt.Errorf("--bind: %v", err)
	}
	return strings.Trim(host, "[]"), nil
}

// CheckPort holds the port flag --name to [lowest, 65535], as the Python CLI's click types.
func CheckPort(name string, port, lowest int) error {
	if port < lowest || port > 65535 {
		return fmt.Errorf("--%s %d is out of range [%d, 65535]", name, port, lowest)
	}
	return nil
}
