// Prints Go's own text for a spread of time.Duration values, one per line as
// "<nanoseconds>\t<Duration.String()>", so that labkit's Go-duration parser is
// tested against what Go really writes (µs with U+00B5, 1m2.5s, 1h0m0s, 0s).
//
// Run: go run tests/data/tools/go_durations.go > tests/data/go/durations.tsv
package main

import (
	"fmt"
	"time"
)

func main() {
	values := []time.Duration{
		0, 1, 999, 1000, 1500, 27355185, 999999999, 1868983839, 2079863882,
		time.Second, 62500 * time.Millisecond, time.Minute, time.Hour,
		time.Hour + 2*time.Minute + 3*time.Second + 4*time.Millisecond,
		-410677761, 410677761, 205520000, 3 * time.Microsecond,
		123456789012345, 1<<63 - 1,
	}
	for _, d := range values {
		fmt.Printf("%d\t%s\n", int64(d), d.String())
	}
	// What time.ParseDuration accepts but String never writes.
	for _, s := range []string{"1.5h", "2h45m", "300ms", "-1.5h", "1us", "1μs", "1µs", "4ns", ".5s", "1.s", "+3s", "1h1m1s1ms1us1ns", "0", "-0"} {
		d, err := time.ParseDuration(s)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d\t%s\n", int64(d), s)
	}
	// Rejected by time.ParseDuration: one per line, prefixed with "!".
	for _, s := range []string{"", "1", "ms", "1.5", "1d", "1 s", "--1s", "1e3ms"} {
		if _, err := time.ParseDuration(s); err == nil {
			panic(s)
		}
		fmt.Printf("!\t%s\n", s)
	}
}
