package linkpath

import "sort"

// Hist counts lateness values (ns) in buckets of about 1 % resolution above 100 µs and 1 µs
// below: exact enough for the p99 ≤ 50 µs check, small enough to export every second. Keys
// are bucket lower bounds in µs; Merge and Quantile work on exported histograms too
// (labkit/testbed/emulator.py does the same in Python).
type Hist struct {
	Counts map[int64]int64
	N      int64
	MaxNs  int64
}

func NewHist() *Hist { return &Hist{Counts: map[int64]int64{}} }

// bucketUs is the lower bound (µs) of the bucket holding ns: 1 µs wide below 100 µs,
// 10 µs below 1 ms, 100 µs below 10 ms, 1 ms below 100 ms, 10 ms above.
func bucketUs(ns int64) int64 {
	us := max(ns, 0) / 1000
	for _, w := range [][2]int64{{100, 1}, {1000, 10}, {10000, 100}, {100000, 1000}} {
		if us < w[0] {
			return us / w[1] * w[1]
		}
	}
	return us / 10000 * 10000
}

// BucketWidthUs is the width of the bucket starting at lower.
func BucketWidthUs(lower int64) int64 {
	switch {
	case lower < 100:
		return 1
	case lower < 1000:
		return 10
	case lower < 10000:
		return 100
	case lower < 100000:
		return 1000
	}
	return 10000
}

func (h *Hist) Add(ns int64) {
	h.Counts[bucketUs(ns)]++
	h.N++
	h.MaxNs = max(h.MaxNs, ns)
}

func (h *Hist) Merge(o *Hist) {
	for k, v := range o.Counts {
		h.Counts[k] += v
	}
	h.N += o.N
	h.MaxNs = max(h.MaxNs, o.MaxNs)
}

// QuantileUs is the upper bound of the bucket holding quantile q (so a reported p99 of 50
// means at least 99 % of packets were at most 50 µs late), or -1 without samples.
func (h *Hist) QuantileUs(q float64) int64 {
	if h.N == 0 {
		return -1
	}
	keys := make([]int64, 0, len(h.Counts))
	for k := range h.Counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	rank := int64(q*float64(h.N-1)) + 1
	var seen int64
	for _, k := range keys {
		seen += h.Counts[k]
		if seen >= rank {
			return k + BucketWidthUs(k)
		}
	}
	return keys[len(keys)-1] + BucketWidthUs(keys[len(keys)-1])
}
