package link

import (
	"math"
	"math/rand/v2"
)

// paretoCap is the largest value of iproute2's distribution tables (32767 / NETEM_DIST_SCALE):
// netem's pareto tail stops there, and so does labkit's.
const paretoCap = 32767.0 / 8192.0

// paretoStd is iproute2's pareto table at quantile u: X ~ Pareto(α = 3, x_m = 1), shifted and
// scaled as netem/pareto.c does ((X − 1.5)·4/3), capped like the table.
func paretoStd(u float64) float64 {
	v := (math.Pow(1-u, -1.0/3) - 1.5) * 4 / 3
	if v > paretoCap || math.IsNaN(v) {
		return paretoCap
	}
	return v
}

// Phi is the standard normal CDF.
func Phi(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// Standardized returns the value of distribution dist (with table for "table") at the
// standard normal z, through the quantile u = Φ(z): delay = DelayNs + JitterNs·value.
//   - uniform: 2u − 1, so JitterNs is the half-width (netem without a distribution);
//   - normal: z, so JitterNs is the standard deviation;
//   - pareto and paretonormal: iproute2's tables (paretonormal = (normal + 3·pareto)/4 at the same u);
//   - table: the u-quantile of the given sorted values.
func Standardized(dist string, table []float64, z float64) float64 {
	switch dist {
	case "normal":
		return z
	case "pareto":
		return paretoStd(Phi(z))
	case "paretonormal":
		return (z + 3*paretoStd(Phi(z))) / 4
	case "table":
		i := int(Phi(z) * float64(len(table)))
		return table[min(max(i, 0), len(table)-1)]
	default:
		return 2*Phi(z) - 1
	}
}

// corrNormal yields standard normal values with lag-1 correlation rho (an AR(1) process whose
// every value is exactly N(0, 1)): the copula behind correlated jitter.
type corrNormal struct {
	rng     *rand.Rand
	last    float64
	started bool
}

func (c *corrNormal) next(rho float64) float64 {
	e := c.rng.NormFloat64()
	if rho == 0 || !c.started {
		c.last, c.started = e, true
		return e
	}
	c.last = rho*c.last + math.Sqrt(1-rho*rho)*e
	return c.last
}

// corrCoin is a yes/no decision with long-run probability p and lag-1 correlation rho: a
// two-state Markov chain with P(yes | yes) = p + rho(1 − p) and P(yes | no) = p(1 − rho).
// Runs of yes then last 1/((1 − p)(1 − rho)) on average.
type corrCoin struct {
	rng  *rand.Rand
	last bool
}

func (c *corrCoin) flip(p, rho float64) bool {
	q := p
	if rho > 0 {
		if c.last {
			q = p + rho*(1-p)
		} else {
			q = p * (1 - rho)
		}
	}
	c.last = c.rng.Float64() < q
	return c.last
}

// gilbertElliott is netem's "loss gemodel": a packet is lost with the current state's
// probability, then the state moves (good → bad with p, bad → good with r), as in netem's
// loss_event.
type gilbertElliott struct {
	rng *rand.Rand
	bad bool
}

func (g *gilbertElliott) lose(l *Loss) bool {
	var lost bool
	if g.bad {
		lost = g.rng.Float64() < l.BadLoss
		if g.rng.Float64() < l.R {
			g.bad = false
		}
	} else {
		lost = g.rng.Float64() < l.GoodLoss
		if g.rng.Float64() < l.P {
			g.bad = true
		}
	}
	return lost
}

// streams are the random sources of one direction, one per decision, so that turning one
// feature on does not change the sequence another one draws.
type streams struct {
	jitter           corrNormal
	loss, dup, order corrCoin
	ge               gilbertElliott
}

func newStreams(seed uint64) streams {
	src := func(k uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15*k+1)) }
	return streams{
		jitter: corrNormal{rng: src(1)},
		loss:   corrCoin{rng: src(2)},
		dup:    corrCoin{rng: src(3)},
		order:  corrCoin{rng: src(4)},
		ge:     gilbertElliott{rng: src(5)},
	}
}
