// Package units reads the human units of labkit's command line exactly as
// labkit/units.py does, so that `labkit echo ... --impl go` accepts the same
// flags as the Python echo: sizes (1000, 14k, 16KiB, 2MiB) and durations
// (100ms, 1.5s, 250us; a bare number is seconds).
package units

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var sizeUnits = map[string]int64{"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000000, "mb": 1000000, "mib": 1 << 20}

var sizePattern = regexp.MustCompile(`^\s*(\d+)\s*([a-zA-Z]*)\s*$`)

// ParseSize returns bytes for 1000, 14k, 16KiB, 2MiB (k = 1000, KiB = 1024).
func ParseSize(text string) (int64, error) {
	m := sizePattern.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size in bytes (examples: 1000, 14k, 16KiB)", text)
	}
	factor, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%q is not a size in bytes (examples: 1000, 14k, 16KiB)", text)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > (1<<62)/factor {
		return 0, fmt.Errorf("%q is too large", text)
	}
	return n * factor, nil
}

// ParseSizeList reads a comma-separated list of sizes, each within [minimum, maximum].
func ParseSizeList(text string, minimum, maximum int64) ([]int64, error) {
	var sizes []int64
	for _, item := range strings.Split(text, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		size, err := ParseSize(item)
		if err != nil {
			return nil, err
		}
		if size < minimum || size > maximum {
			return nil, fmt.Errorf("size %d is out of range [%d, %d] bytes", size, minimum, maximum)
		}
		sizes = append(sizes, size)
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("expected a comma-separated list of sizes, e.g. 1000,14000,16000")
	}
	return sizes, nil
}

var durationUnits = map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}

var durationPattern = regexp.MustCompile(`^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h)?\s*$`)

// ParseDuration returns the duration of 100ms, 1.5s, 250us or 2 (seconds).
func ParseDuration(text string) (time.Duration, error) {
	m := durationPattern.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("%q is not a duration (examples: 100ms, 1.5s, 250us)", text)
	}
	number, _ := strconv.ParseFloat(m[1], 64)
	unit := m[2]
	if unit == "" {
		unit = "s"
	}
	nanoseconds := number * durationUnits[unit] * float64(time.Second)
	if nanoseconds >= math.MaxInt64 { // a time.Duration holds about 292 years; beyond, Go's conversion is undefined
		return 0, fmt.Errorf("%q is too long a duration", text)
	}
	return time.Duration(nanoseconds), nil
}
