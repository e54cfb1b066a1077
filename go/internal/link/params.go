// Package link is the testbed's link model: what one direction of an emulated link does to
// each packet (delay with jitter, loss, duplication, reordering, a rate with a queue, traces,
// a timeline of changes), written as a pure scheduler. Time is passed in as nanoseconds and
// nothing here reads a clock, touches a device or starts a goroutine, so every behaviour is
// tested with synthetic times (link_test.go); the data path (go/internal/linkpath) feeds it
// real packets.
//
// The parameters mean what netem's mean (tc-netem(8)), and the trace-driven rate what
// Mahimahi's does; where labkit differs on purpose (correlation that keeps the configured
// distribution, a queue that holds only what waits for the rate), the field says so.
package link

import (
	"errors"
	"fmt"
	"math"
)

// Params are one direction's settings, as labkit/testbed/linkspec.py writes them (JSON).
type Params struct {
	DelayNs int64 `json:"delay_ns"`
	// JitterNs is netem's jitter: the half-width of a uniform distribution, or the scale
	// (σ) of the named and table distributions, added to DelayNs.
	JitterNs int64 `json:"jitter_ns"`
	// JitterCorrelation ρ in [0, 1): successive delays come from an AR(1) Gaussian copula
	// with lag-1 correlation ρ, so the distribution of delays stays the configured one
	// (netem's correlation changes the distribution).
	JitterCorrelation  float64   `json:"jitter_correlation"`
	JitterDistribution string    `json:"jitter_distribution"` // uniform, normal, pareto, paretonormal, table
	JitterTable        []float64 `json:"jitter_table"`        // with "table": sorted standardized quantiles

	Loss      Loss    `json:"loss"`
	Duplicate float64 `json:"duplicate"`
	// DuplicateCorrelation and the other *Correlation of yes/no decisions: the lag-1
	// correlation of a two-state Markov chain whose long-run probability stays the given one.
	DuplicateCorrelation float64 `json:"duplicate_correlation"`
	Reorder              float64 `json:"reorder"`
	ReorderCorrelation   float64 `json:"reorder_correlation"`
	ReorderGap           int     `json:"reorder_gap"`

	RateBps float64 `json:"rate_bps"` // 0: no rate limit
	// QueuePackets and QueueBytes limit what waits for the rate (0: no limit); packets
	// propagating on the wire are not in the queue, unlike netem's limit.
	QueuePackets  int    `json:"queue_packets"`
	QueueBytes    int64  `json:"queue_bytes"`
	AQM           string `json:"aqm"` // "droptail" (default) or "codel"
	CodelTarget   int64  `json:"codel_target_ns"`
	CodelInterval int64  `json:"codel_interval_ns"`

	DelayTrace *DelayTrace `json:"delay_trace"`
	RateTrace  *RateTrace  `json:"rate_trace"`
	Partition  bool        `json:"partition"` // every packet entering the link is lost

	MTU int `json:"mtu"` // bytes of one wire packet, for CoDel and for how finely a rate paces
}

// Loss is netem's loss: "random" with a probability and a correlation, or "gemodel"
// (Gilbert-Elliott: P(good→bad) p, P(bad→good) r, loss probability 1-h in the bad state
// and 1-k in the good one; labkit fills netem's defaults r = 1-p, 1-h = 1, 1-k = 0).
type Loss struct {
	Model       string  `json:"model"` // "", "random" or "gemodel"
	P           float64 `json:"p"`
	Correlation float64 `json:"correlation"`
	R           float64 `json:"r"`
	BadLoss     float64 `json:"bad_loss"`
	GoodLoss    float64 `json:"good_loss"`
}

// DelayTrace is a time series of one-way delays (a step function) that replaces DelayNs
// while it is set; it starts when the parameters holding it take effect and loops.
type DelayTrace struct {
	TNs      []int64 `json:"t_ns"`
	DelayNs  []int64 `json:"delay_ns"`
	PeriodNs int64   `json:"period_ns"`
}

// RateTrace is Mahimahi's trace: each entry is a millisecond at which the link may deliver
// one MTU-sized packet (1504 bytes); the trace repeats with a period of its last entry.
type RateTrace struct {
	Ms []int64 `json:"ms"`
}

// MahimahiPacketBytes is what one delivery opportunity of a Mahimahi trace carries.
const MahimahiPacketBytes = 1504

// Default CoDel settings (RFC 8289).
const (
	DefaultCodelTarget   = 5_000_000
	DefaultCodelInterval = 100_000_000
	DefaultMTU           = 1500
)

// Validate says what is wrong with p in one line, or nil.
func (p *Params) Validate() error {
	prob := func(name string, v float64) error {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("%s must be a probability in [0, 1], not %g", name, v)
		}
		return nil
	}
	corr := func(name string, v float64) error {
		if !(v >= 0 && v < 1) {
			return fmt.Errorf("%s must be in [0, 1), not %g", name, v)
		}
		return nil
	}
	checks := []error{
		prob("duplicate", p.Duplicate), prob("reorder", p.Reorder), prob("loss p", p.Loss.P),
		prob("loss r", p.Loss.R), prob("loss 1-h", p.Loss.BadLoss), prob("loss 1-k", p.Loss.GoodLoss),
		corr("jitter correlation", p.JitterCorrelation), corr("loss correlation", p.Loss.Correlation),
		corr("duplicate correlation", p.DuplicateCorrelation), corr("reorder correlation", p.ReorderCorrelation),
	}
	if err := errors.Join(checks...); err != nil {
		return err
	}
	if p.DelayNs < 0 || p.JitterNs < 0 || p.RateBps < 0 || p.QueuePackets < 0 || p.QueueBytes < 0 || p.ReorderGap < 0 {
		return errors.New("delay, jitter, rate, queue and gap must not be negative")
	}
	switch p.JitterDistribution {
	case "", "uniform", "normal", "pareto", "paretonormal":
	case "table":
		if len(p.JitterTable) == 0 {
			return errors.New("jitter distribution table has no values")
		}
	default:
		return fmt.Errorf("unknown jitter distribution %q", p.JitterDistribution)
	}
	switch p.Loss.Model {
	case "", "random", "gemodel":
	default:
		return fmt.Errorf("unknown loss model %q", p.Loss.Model)
	}
	switch p.AQM {
	case "", "droptail", "codel":
	default:
		return fmt.Errorf("unknown aqm %q", p.AQM)
	}
	if t := p.DelayTrace; t != nil {
		if len(t.TNs) == 0 || len(t.TNs) != len(t.DelayNs) || t.PeriodNs <= t.TNs[len(t.TNs)-1] {
			return errors.New("delay trace needs as many times as delays and a period past its last time")
		}
	}
	if t := p.RateTrace; t != nil && (len(t.Ms) == 0 || t.Ms[len(t.Ms)-1] <= 0) {
		return errors.New("rate trace needs at least one delivery opportunity after 0 ms")
	}
	return nil
}

// perPacket reports whether p decides something for every wire packet, so that a
// segmentation-offload super-packet must be cut into its segments before it meets the model.
func (p Params) perPacket() bool {
	return p.Loss.P > 0 || p.Loss.GoodLoss > 0 || p.Duplicate > 0 || p.Reorder > 0 || p.JitterNs > 0 ||
		p.AQM == "codel" || p.RateTrace != nil
}

// MaxSegments is how many wire packets one item may stand for under p: 1 where the model
// decides per packet, enough for about PacingNs of transmission where a rate paces the link,
// and 0 (no limit) where only a delay applies.
func (p Params) MaxSegments() int {
	if p.perPacket() {
		return 1
	}
	if p.RateBps > 0 {
		mtu := p.mtu()
		return max(1, int(p.RateBps*PacingNs/8e9/float64(mtu)))
	}
	return 0
}

// PacingNs bounds the transmission time of one item on a rate-limited link: finer items
// cost more writes, coarser ones deliver a rate as bursts.
const PacingNs = 100_000

func (p *Params) mtu() int {
	if p.MTU > 0 {
		return p.MTU
	}
	return DefaultMTU
}

func (p *Params) codelTimes() (target, interval int64) {
	target, interval = p.CodelTarget, p.CodelInterval
	if target <= 0 {
		target = DefaultCodelTarget
	}
	if interval <= 0 {
		interval = DefaultCodelInterval
	}
	return target, interval
}

func sameDelayTrace(a, b *DelayTrace) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.PeriodNs == b.PeriodNs && equalInts(a.TNs, b.TNs) && equalInts(a.DelayNs, b.DelayNs)
}

func sameRateTrace(a, b *RateTrace) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equalInts(a.Ms, b.Ms)
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// clampDelay keeps a delay with jitter from going negative or overflowing.
func clampDelay(v float64) int64 {
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	if v > 1e15 {
		return 1e15
	}
	return int64(v)
}
