package link

import (
	"math"
	"slices"
	"testing"
)

const ms = int64(1_000_000)

// drain releases everything due by now and returns the values in delivery order (copies repeated).
func drain(d *Direction[int], now int64) []Out[int] {
	return d.Release(now, nil)
}

func item(v, bytes int) Item[int] { return Item[int]{V: v, Bytes: bytes, Segs: 1} }

func TestFixedDelayKeepsOrderAndTime(t *testing.T) {
	d := NewDirection[int](Params{DelayNs: 10 * ms}, 1, 0)
	for i := 0; i < 5; i++ {
		if c := d.Enqueue(int64(i)*ms, item(i, 100)); c != Accepted {
			t.Fatalf("item %d: cause %d", i, c)
		}
	}
	if got := d.NextWake(); got != 10*ms {
		t.Fatalf("next wake %d, want %d", got, 10*ms)
	}
	if out := drain(d, 12*ms-1); len(out) != 2 || out[0].V != 0 || out[1].V != 1 || out[1].Due != 11*ms {
		t.Fatalf("released by 12ms-1ns: %+v", out)
	}
	out := drain(d, msAt(100))
	if len(out) != 3 || out[2].V != 4 || out[2].Due != 14*ms {
		t.Fatalf("rest: %+v", out)
	}
	if d.C.InSegs != 5 || d.C.OutSegs != 5 || d.C.OutBytes != 500 {
		t.Fatalf("counters %+v", d.C)
	}
}

func msAt(msCount int64) int64 { return msCount * ms }

// jitterSamples returns n delays (in units of the jitter) drawn through toLine, far enough
// apart that keeping order never holds a packet back.
func jitterSamples(p Params, n int) []float64 {
	p.DelayNs, p.JitterNs = 1_000_000_000, 1_000_000
	d := NewDirection[int](p, 7, 0)
	var out []float64
	for i := 0; i < n; i++ {
		now := int64(i) * 10_000_000_000
		d.Enqueue(now, item(i, 100))
		o := drain(d, now+2_000_000_000)
		out = append(out, float64(o[0].Due-now-p.DelayNs)/float64(p.JitterNs))
	}
	return out
}

// ksDistance is the Kolmogorov-Smirnov distance between the samples and the CDF.
func ksDistance(samples []float64, cdf func(float64) float64) float64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	n := float64(len(s))
	worst := 0.0
	for i, x := range s {
		f := cdf(x)
		worst = max(worst, math.Abs(f-float64(i)/n), math.Abs(float64(i+1)/n-f))
	}
	return worst
}

// cdfOfQuantile inverts a non-decreasing quantile function by bisection.
func cdfOfQuantile(q func(u float64) float64) func(float64) float64 {
	return func(x float64) float64 {
		lo, hi := 0.0, 1.0
		for i := 0; i < 60; i++ {
			mid := (lo + hi) / 2
			if q(mid) <= x {
				lo = mid
			} else {
				hi = mid
			}
		}
		return lo
	}
}

func TestJitterDistributionsMatchTheirDefinitions(t *testing.T) {
	normalQ := func(u float64) float64 { return math.Sqrt2 * math.Erfinv(2*u-1) }
	table := []float64{-1, -0.5, 0, 0.25, 2}
	cases := map[string]func(float64) float64{
		"uniform":      func(x float64) float64 { return math.Min(1, math.Max(0, (x+1)/2)) },
		"normal":       Phi,
		"pareto":       cdfOfQuantile(paretoStd),
		"paretonormal": cdfOfQuantile(func(u float64) float64 { return (normalQ(u) + 3*paretoStd(u)) / 4 }),
	}
	const n = 20000
	for name, cdf := range cases {
		samples := jitterSamples(Params{JitterDistribution: name, JitterTable: table}, n)
		// 1.63/sqrt(n) is the KS critical distance at 1 %; a seeded draw well inside it.
		if dist := ksDistance(samples, cdf); dist > 1.63/math.Sqrt(n) {
			t.Errorf("%s: KS distance %.4f over %d samples", name, dist, n)
		}
	}
	// An empirical table: each of its values equally often.
	counts := map[float64]int{}
	for _, v := range jitterSamples(Params{JitterDistribution: "table", JitterTable: table}, n) {
		counts[v]++
	}
	for _, v := range table {
		if f := float64(counts[v]) / n; math.Abs(f-0.2) > 0.012 {
			t.Errorf("table value %g drawn %.3f of the time", v, f)
		}
	}
	// netem's pareto: the table's minimum and its cap.
	p := jitterSamples(Params{JitterDistribution: "pareto"}, n)
	if lo, hi := slices.Min(p), slices.Max(p); lo < -2.0/3-1e-6 || hi > paretoCap+1e-6 || hi < 3.5 {
		t.Errorf("pareto range [%g, %g]", lo, hi)
	}
}

func lag1(x []float64) float64 {
	var mean float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	var num, den float64
	for i := range x {
		den += (x[i] - mean) * (x[i] - mean)
		if i > 0 {
			num += (x[i] - mean) * (x[i-1] - mean)
		}
	}
	return num / den
}

func TestCorrelatedJitterKeepsTheDistribution(t *testing.T) {
	const n = 40000
	samples := jitterSamples(Params{JitterDistribution: "normal", JitterCorrelation: 0.6}, n)
	if r := lag1(samples); math.Abs(r-0.6) > 0.02 {
		t.Errorf("lag-1 correlation %.3f, want 0.6", r)
	}
	// Correlated samples carry less information: allow the distance of ~n/4 independent ones.
	if dist := ksDistance(samples, Phi); dist > 1.63/math.Sqrt(n/4) {
		t.Errorf("KS distance %.4f with correlation", dist)
	}
	uniform := jitterSamples(Params{JitterDistribution: "uniform", JitterCorrelation: 0.6}, n)
	if dist := ksDistance(uniform, func(x float64) float64 { return (x + 1) / 2 }); dist > 1.63/math.Sqrt(n/4) {
		t.Errorf("uniform with correlation: KS distance %.4f", dist)
	}
}

// lossPattern sends n packets 1 ms apart and returns which were lost.
func lossPattern(p Params, n int) []bool {
	d := NewDirection[int](p, 3, 0)
	lost := make([]bool, n)
	for i := range lost {
		lost[i] = d.Enqueue(int64(i)*ms, item(i, 100)) == DropLoss
	}
	return lost
}

func bursts(lost []bool) (count int, meanLen float64) {
	total, run := 0, 0
	for _, l := range append(lost, false) {
		if l {
			run++
			continue
		}
		if run > 0 {
			count++
			total += run
		}
		run = 0
	}
	return count, float64(total) / float64(count)
}

func rate(lost []bool) float64 {
	k := 0
	for _, l := range lost {
		if l {
			k++
		}
	}
	return float64(k) / float64(len(lost))
}

func TestRandomLossRateAndCorrelation(t *testing.T) {
	const n = 200000
	plain := lossPattern(Params{Loss: Loss{Model: "random", P: 0.05}}, n)
	if r := rate(plain); math.Abs(r-0.05) > 0.003 {
		t.Errorf("loss rate %.4f, want 0.05", r)
	}
	corr := lossPattern(Params{Loss: Loss{Model: "random", P: 0.05, Correlation: 0.5}}, n)
	if r := rate(corr); math.Abs(r-0.05) > 0.005 {
		t.Errorf("correlated loss rate %.4f, want 0.05", r)
	}
	// Runs of losses last 1/((1-p)(1-rho)) on average.
	if _, mean := bursts(corr); math.Abs(mean-1/(0.95*0.5))/(1/(0.95*0.5)) > 0.05 {
		t.Errorf("mean burst %.3f, want %.3f", mean, 1/(0.95*0.5))
	}
	if _, mean := bursts(plain); math.Abs(mean-1/0.95) > 0.02 {
		t.Errorf("uncorrelated mean burst %.3f", mean)
	}
}

func TestGilbertElliottBurstsAndRate(t *testing.T) {
	const n = 200000
	// Simple Gilbert (netem gemodel p r): every packet lost in the bad state, none in the good.
	lost := lossPattern(Params{Loss: Loss{Model: "gemodel", P: 0.02, R: 0.25, BadLoss: 1}}, n)
	if r, want := rate(lost), 0.02/(0.02+0.25); math.Abs(r-want)/want > 0.05 {
		t.Errorf("loss rate %.4f, want %.4f", r, want)
	}
	if _, mean := bursts(lost); math.Abs(mean-4)/4 > 0.05 {
		t.Errorf("mean burst %.3f, want 1/r = 4", mean)
	}
	// Full Gilbert-Elliott: some loss in the good state, not all in the bad.
	ge := lossPattern(Params{Loss: Loss{Model: "gemodel", P: 0.05, R: 0.2, BadLoss: 0.5, GoodLoss: 0.01}}, n)
	want := 0.05/(0.05+0.2)*0.5 + 0.2/(0.05+0.2)*0.01
	if r := rate(ge); math.Abs(r-want)/want > 0.05 {
		t.Errorf("GE loss rate %.4f, want %.4f", r, want)
	}
}

func TestDuplicationAndNetemArithmetic(t *testing.T) {
	d := NewDirection[int](Params{Duplicate: 0.1}, 5, 0)
	const n = 50000
	for i := 0; i < n; i++ {
		d.Enqueue(int64(i)*ms, item(i, 100))
	}
	out := drain(d, msAt(n+1))
	dups := 0
	for _, o := range out {
		if o.Copies == 2 {
			dups++
		}
	}
	if f := float64(dups) / n; math.Abs(f-0.1) > 0.006 {
		t.Errorf("duplicated fraction %.4f", f)
	}
	if d.C.OutSegs != n+int64(dups) || d.C.Duplicated != int64(dups) {
		t.Errorf("counters %+v, %d duplicates", d.C, dups)
	}
	// Duplicated and lost: one copy goes (count = 1 + dup - loss).
	both := NewDirection[int](Params{Duplicate: 1, Loss: Loss{Model: "random", P: 1}}, 5, 0)
	if c := both.Enqueue(0, item(1, 100)); c != Accepted || drain(both, ms)[0].Copies != 1 {
		t.Error("a duplicated packet that is lost once must still arrive once")
	}
}

func TestReorderSendsSomePacketsAheadWithGap(t *testing.T) {
	// netem "reorder 100% gap 5": packets 1-4 delayed, the 5th sent at once, and again.
	d := NewDirection[int](Params{DelayNs: 10 * ms, Reorder: 1, ReorderGap: 5}, 1, 0)
	for i := 0; i < 10; i++ {
		d.Enqueue(int64(i)*100_000, item(i, 100))
	}
	var order []int
	for _, o := range drain(d, msAt(20)) {
		order = append(order, o.V)
	}
	if want := []int{4, 9, 0, 1, 2, 3, 5, 6, 7, 8}; !slices.Equal(order, want) {
		t.Fatalf("delivery order %v, want %v", order, want)
	}
	if d.C.Reordered != 2 {
		t.Errorf("reordered %d", d.C.Reordered)
	}
	// With gap 1 a packet goes ahead with the given probability.
	p := NewDirection[int](Params{DelayNs: 10 * ms, Reorder: 0.25}, 2, 0)
	const n = 40000
	for i := 0; i < n; i++ {
		p.Enqueue(int64(i)*ms, item(i, 100))
	}
	if f := float64(p.C.Reordered) / n; math.Abs(f-0.25) > 0.01 {
		t.Errorf("reordered fraction %.4f", f)
	}
}

func TestJitterNeverReordersUnlessAsked(t *testing.T) {
	d := NewDirection[int](Params{DelayNs: 10 * ms, JitterNs: 5 * ms, JitterDistribution: "normal"}, 9, 0)
	for i := 0; i < 2000; i++ {
		d.Enqueue(int64(i)*100_000, item(i, 100))
	}
	out := drain(d, msAt(1000))
	for i, o := range out {
		if o.V != i {
			t.Fatalf("packet %d delivered at position %d", o.V, i)
		}
	}
}

// The data path starts a packet's delay at its send, which may be before the model's last
// step: At tells it how far back it may go, so that the model's clock never runs backwards.
func TestAtIsTheLatestTimeTheModelAdvancedTo(t *testing.T) {
	d := NewDirection[int](Params{DelayNs: 10 * ms}, 1, 3*ms)
	if d.At() != 3*ms {
		t.Fatalf("at %d after start at 3 ms", d.At())
	}
	d.Enqueue(5*ms, item(1, 100))
	drain(d, 8*ms)
	d.Enqueue(7*ms, item(2, 100)) // sent before the release at 8 ms, read after it
	if d.At() != 8*ms {
		t.Fatalf("at %d, want 8 ms: an earlier arrival moved the clock back", d.At())
	}
	if out := drain(d, msAt(100)); len(out) != 2 || out[0].Due != 15*ms || out[1].Due != 17*ms {
		t.Fatalf("released %+v; want the second due 10 ms after its send", out)
	}
}
