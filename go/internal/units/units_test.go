package units

import (
	"testing"
	"time"
)

// The same readings as labkit/units.py: tests/test_units.py's cases, in Go.
func TestParseSize(t *testing.T) {
	cases := map[string]int64{"1000": 1000, "14k": 14000, "16KiB": 16384, "2MiB": 2 << 20, " 7 b ": 7, "3mb": 3000000}
	for text, want := range cases {
		got, err := ParseSize(text)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "1.5k", "-1", "10 GiB", "12kbit"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseSizeListBounds(t *testing.T) {
	if got, err := ParseSizeList("10, 16k,", 0, 1<<30); err != nil || len(got) != 2 || got[1] != 16000 {
		t.Errorf("ParseSizeList = %v, %v", got, err)
	}
	if _, err := ParseSizeList("2MiB", 0, 1<<20); err == nil {
		t.Error("a size above the maximum was accepted")
	}
	if _, err := ParseSizeList(" , ", 0, 10); err == nil {
		t.Error("an empty list was accepted")
	}
}

func TestParseDuration(t *testing.T) {
	cases := map[string]time.Duration{"100ms": 100 * time.Millisecond, "1.5s": 1500 * time.Millisecond, "2": 2 * time.Second,
		"250us": 250 * time.Microsecond, ".5s": 500 * time.Millisecond, "1m": time.Minute}
	for text, want := range cases {
		got, err := ParseDuration(text)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1s", "1 day", "ms", "300000000000s"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}
