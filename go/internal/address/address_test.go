package address

import (
	"strings"
	"testing"
)

func TestParseAcceptsWhatPythonAccepts(t *testing.T) {
	for text, want := range map[string]string{"127.0.0.1:0": "127.0.0.1", "[::1]:50051": "[::1]", " host-a.lab:1 ": "host-a.lab"} {
		if host, _, err := Parse(text, true); err != nil || host != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", text, host, err, want)
		}
	}
}

func TestParseRefusesWhatPythonRefuses(t *testing.T) {
	cases := []struct {
		text      string
		portZero  bool
		complaint string
	}{
		{"nope", true, "is not HOST:PORT"},
		{":0", true, "is not HOST:PORT"},
		{"localhost:http", true, "is not HOST:PORT"},
		{"::1:80", true, "write IPv6 addresses in brackets"},
		{"127.0.0.1:99999", true, "out of range [0, 65535]"},
		{"127.0.0.1:0", false, "out of range [1, 65535]"},
	}
	for _, c := range cases {
		if _, _, err := Parse(c.text, c.portZero); err == nil || !strings.Contains(err.Error(), c.complaint) {
			t.Errorf("Parse(%q, %v) = %v; want %q", c.text, c.portZero, err, c.complaint)
		}
	}
}
