// Package call is the client of `labkit echo call --impl go`: timed Echo calls on grpc-go, one JSON line
// each, the same plan (sizes, repeats, warm-up, order, gaps) and the same rows as labkit/echo/client.py.
package call

import (
	"fmt"
	"iter"
	mathrand "math/rand/v2"
	"time"

	"google.golang.org/grpc"

	"labkit/go/internal/address"
	"labkit/go/internal/echo"
	"labkit/go/internal/limits"
	"labkit/go/internal/options"
	"labkit/go/internal/pyrandom"
	"labkit/go/internal/units"
)

// Config is what `labkit-go call` is told: the flags of `labkit echo call`, durations and sizes as written.
type Config struct {
	Target, Sizes, Gap, BackgroundGap, Order, Timeout, TLSCA, TLSServerName string
	Repeats, Warmup, KeepaliveMs                                            int
	Seed                                                                    int64
	Seeded, Cold, TCPInfo                                                   bool
	GRPCOptions                                                             []string
	// Given are the flags set on the command line, for the checks a default cannot tell apart (Python's
	// `--keepalive-ms 0` is refused, while leaving it out is fine).
	Given map[string]bool
}

// Plan is a Config checked, within every bound: the calls to make and how.
type Plan struct {
	Config
	sizes                    []int64
	gap, background, timeout time.Duration
	options                  options.Values
	dial                     []grpc.DialOption
}

// NewPlan checks c as the Python client does, each refusal one line naming its flag.
func NewPlan(c Config) (*Plan, error) {
	p := &Plan{Config: c}
	var err error
	if c.Target == "" {
		return nil, fmt.Errorf("--target HOST:PORT is required")
	}
	if _, _, err = address.Parse(c.Target, false); err != nil {
		return nil, fmt.Errorf("--target: %v", err)
	}
	if p.sizes, err = units.ParseSizeList(c.Sizes, 0, limits.MaxRequestBytes); err != nil {
		return nil, fmt.Errorf("--sizes: %v", err)
	}
	if c.Repeats < 1 || c.Repeats > limits.MaxRepeats || c.Warmup < 0 || c.Warmup > limits.MaxWarmup {
		return nil, fmt.Errorf("--repeats must be between 1 and %d and --warmup between 0 and %d", limits.MaxRepeats, limits.MaxWarmup)
	}
	if len(p.sizes)*c.Repeats > limits.MaxCalls {
		return nil, fmt.Errorf("%d sizes × %d repeats is more than %d calls", len(p.sizes), c.Repeats, limits.MaxCalls)
	}
	if c.KeepaliveMs < 0 || c.KeepaliveMs > limits.MaxKeepaliveMs || (c.KeepaliveMs == 0 && c.Given["keepalive-ms"]) {
		return nil, fmt.Errorf("--keepalive-ms must be between 1 and %d", limits.MaxKeepaliveMs)
	}
	if c.Order != "sequential" && c.Order != "shuffled" {
		return nil, fmt.Errorf("--order is sequential or shuffled, not %q", c.Order)
	}
	if p.gap, err = limits.ParseDuration("gap", c.Gap); err != nil {
		return nil, err
	}
	if p.timeout, err = limits.ParseDuration("timeout", c.Timeout); err != nil {
		return nil, err
	}
	if c.BackgroundGap != "" {
		if p.background, err = limits.ParseDuration("background-gap", c.BackgroundGap); err != nil {
			return nil, err
		}
		if p.background <= 0 {
			return nil, fmt.Errorf("--background-gap must be a positive duration")
		}
		if c.Cold {
			return nil, fmt.Errorf("--background-gap needs one shared channel; it cannot be combined with --cold")
		}
	}
	if c.TLSServerName != "" && c.TLSCA == "" {
		return nil, fmt.Errorf("--tls-server-name needs --tls-ca")
	}
	if p.options, err = options.Parse(c.GRPCOptions, "client"); err != nil {
		return nil, err
	}
	dial := echo.Dial{TLSCA: c.TLSCA, TLSServerName: c.TLSServerName, KeepaliveMs: c.KeepaliveMs, Options: p.options}
	if p.dial, err = dial.DialOptions(); err != nil {
		return nil, err
	}
	return p, nil
}

// Schedule is the calls to make as (recorded, size): warm-up first (sizes in turn), then repeats of each
// size, in order or shuffled, as Python's call_schedule: with a seed, shuffled by CPython's generator, so
// both implementations make the same calls in the same order. It is generated as the calls are made: in
// order nothing is held per call, shuffled one index per call (the order must exist whole to be shuffled;
// at most limits.MaxCalls), never a call's row.
func (p *Plan) Schedule() iter.Seq2[bool, int64] {
	return func(yield func(bool, int64) bool) {
		for i := 0; i < p.Warmup; i++ {
			if !yield(false, p.sizes[i%len(p.sizes)]) {
				return
			}
		}
		if p.Order != "shuffled" {
			for _, size := range p.sizes {
				for range p.Repeats {
					if !yield(true, size) {
						return
					}
				}
			}
			return
		}
		for _, index := range p.shuffledOrder() {
			if !yield(true, p.sizes[index]) {
				return
			}
		}
	}
}

// shuffledOrder is the index into sizes of every recorded call, shuffled: p.Repeats of each index.
func (p *Plan) shuffledOrder() []uint32 {
	order := make([]uint32, 0, len(p.sizes)*p.Repeats)
	for index := range len(p.sizes) {
		for range p.Repeats {
			order = append(order, uint32(index))
		}
	}
	swap := func(i, j int) { order[i], order[j] = order[j], order[i] }
	if p.Seeded {
		pyrandom.New(p.Seed).Shuffle(len(order), swap)
	} else {
		mathrand.Shuffle(len(order), swap)
	}
	return order
}
