package link

import (
	"math"
	"sort"
)

// Item is what the data path hands the model: an opaque value and its size on the wire.
type Item[T any] struct {
	V     T
	Bytes int // bytes on the wire: IP packets, the headers of every segment included
	Segs  int // wire packets it stands for (a segmentation-offload super-packet stands for several)
}

// Out is an item due for delivery.
type Out[T any] struct {
	Item[T]
	Due    int64 // when the model wants it delivered
	Copies int   // 1, or 2 for a duplicated packet
}

// Cause is what became of an item handed to Enqueue.
type Cause int

const (
	Accepted Cause = iota
	DropPartition
	DropLoss
	DropQueue
	DropAQM
)

// Counters count wire packets (segments) and bytes since the direction was made.
type Counters struct {
	InSegs, InBytes   int64 // handed to Enqueue
	OutSegs, OutBytes int64 // released, every copy counted
	DropPartition     int64
	DropLoss          int64
	DropQueue         int64 // tail drop: the queue limit
	DropAQM           int64 // CoDel
	Duplicated        int64
	Reordered         int64
}

// Timed is one entry of a timeline: from AtNs after the timeline's origin, the direction
// runs with Params (the whole parameter set, as labkit/testbed/schedule.py expands it).
type Timed struct {
	AtNs   int64  `json:"at_ns"`
	Label  string `json:"label"`
	Params Params `json:"params"`
}

// Applied records one timeline entry taking effect.
type Applied struct {
	Index int
	Label string
	AtNs  int64 // the time it was due, on the model's clock
}

type queued[T any] struct {
	item    Item[T]
	copies  int
	arrival int64
	cum     int64 // bytes enqueued on this direction up to and including this item
	left    int   // bytes still to send (a rate trace sends an item over several opportunities)
}

// Direction is one direction of a link. It is not safe for concurrent use.
type Direction[T any] struct {
	p   Params
	rnd streams

	queue       fifo[queued[T]] // waiting for the rate
	queuedBytes int64
	queuedSegs  int
	cumBytes    int64
	transit     *queued[T] // rate trace: the item being sent across opportunities
	linkFree    int64      // fixed rate: when the item in transmission has left
	codel       codelState
	traceOrigin int64 // rate trace: when it started
	nextOpp     int64 // rate trace: index of the next unused delivery opportunity
	delayOrigin int64 // delay trace: when it started

	line, express fifo[Out[T]] // propagating; express holds reordered items
	lastDue       int64
	reorderCount  int

	timeline []Timed
	tlOrigin int64
	tlNext   int
	applied  []Applied

	at int64 // the latest time the model has advanced to

	C         Counters
	peakBytes int64
	peakSegs  int
	sojourn   map[int64]int64 // per millisecond of arrival (model time): the longest wait in the queue
}

// NewDirection makes a direction running with p from now on; seed fixes its random streams.
func NewDirection[T any](p Params, seed uint64, now int64) *Direction[T] {
	d := &Direction[T]{rnd: newStreams(seed)}
	d.p = p
	d.traceOrigin, d.delayOrigin, d.at = now, now, now
	return d
}

// Params returns the parameters in effect.
func (d *Direction[T]) Params() Params { return d.p }

// SetParams changes the parameters from time at on. Packets already queued or propagating
// keep their place; traces restart only when they change.
func (d *Direction[T]) SetParams(p Params, at int64) {
	d.serve(at)
	old := d.p
	d.p = p
	if !sameDelayTrace(old.DelayTrace, p.DelayTrace) {
		d.delayOrigin = at
	}
	if !sameRateTrace(old.RateTrace, p.RateTrace) {
		d.traceOrigin, d.nextOpp = at, 0
		if d.transit != nil { // what was half sent goes out now
			d.toLine(d.transit.item, d.transit.copies, at)
			d.transit = nil
		}
	}
	if p.AQM != "codel" {
		d.codel = codelState{}
	}
}

// Configure sets the base parameters and a timeline whose times count from origin: the
// entries already due by now are skipped, the last of them (or base) takes effect now.
func (d *Direction[T]) Configure(base Params, timeline []Timed, origin, now int64) {
	d.timeline, d.tlOrigin, d.tlNext = timeline, origin, 0
	current := base
	for d.tlNext < len(timeline) && origin+timeline[d.tlNext].AtNs <= now {
		current = timeline[d.tlNext].Params
		d.tlNext++
	}
	d.SetParams(current, now)
}

// TakeApplied returns the timeline entries applied since the last call.
func (d *Direction[T]) TakeApplied() []Applied {
	a := d.applied
	d.applied = nil
	return a
}

// TakeQueuePeak returns the largest queue (bytes, wire packets) since the last call.
func (d *Direction[T]) TakeQueuePeak() (int64, int) {
	b, s := d.peakBytes, d.peakSegs
	d.peakBytes, d.peakSegs = d.queuedBytes, d.queuedSegs
	return b, s
}

// noteSojourn keeps, per millisecond of arrival, the longest an item that arrived then waited in the queue before
// its transmission started: what a packet behind a standing queue waits, in the direction it waits.
func (d *Direction[T]) noteSojourn(arrival, start int64) {
	if d.sojourn == nil {
		d.sojourn = map[int64]int64{}
	}
	ms := arrival / 1e6
	if wait := start - arrival; wait >= d.sojourn[ms] {
		d.sojourn[ms] = wait
	}
}

// TakeSojourn returns the longest wait in the queue per millisecond of arrival (model time, ms -> ns) of the
// items that left the queue since the last call, and forgets them.
func (d *Direction[T]) TakeSojourn() map[int64]int64 {
	s := d.sojourn
	d.sojourn = nil
	return s
}

// Enqueue hands the model an item arriving at now and says what became of it.
func (d *Direction[T]) Enqueue(now int64, it Item[T]) Cause {
	d.advance(now)
	p, c, segs := &d.p, &d.C, int64(it.Segs)
	c.InSegs += segs
	c.InBytes += int64(it.Bytes)
	if p.Partition {
		c.DropPartition += segs
		return DropPartition
	}
	// netem's arithmetic: a packet may be duplicated and one copy lost.
	copies := 1
	if p.Duplicate > 0 && d.rnd.dup.flip(p.Duplicate, p.DuplicateCorrelation) {
		copies++
		c.Duplicated += segs
	}
	if d.lost() {
		copies--
		c.DropLoss += segs
	}
	if copies == 0 {
		return DropLoss
	}
	if p.RateBps <= 0 && p.RateTrace == nil {
		d.toLine(it, copies, now)
		return Accepted
	}
	full := (p.QueuePackets > 0 && d.queuedSegs+it.Segs > p.QueuePackets) ||
		(p.QueueBytes > 0 && d.queuedBytes+int64(it.Bytes) > p.QueueBytes)
	if full && d.queue.len() > 0 {
		c.DropQueue += segs
		return DropQueue
	}
	d.cumBytes += int64(it.Bytes)
	d.queue.push(queued[T]{item: it, copies: copies, arrival: now, cum: d.cumBytes, left: it.Bytes * copies})
	d.queuedBytes += int64(it.Bytes)
	d.queuedSegs += it.Segs
	d.peakBytes = max(d.peakBytes, d.queuedBytes)
	d.peakSegs = max(d.peakSegs, d.queuedSegs)
	d.serve(now)
	return Accepted
}

func (d *Direction[T]) lost() bool {
	l := &d.p.Loss
	if l.Model == "gemodel" {
		return d.rnd.ge.lose(l)
	}
	return l.P > 0 && d.rnd.loss.flip(l.P, l.Correlation)
}

// Release appends to out every item due by now, in delivery order, and returns it.
func (d *Direction[T]) Release(now int64, out []Out[T]) []Out[T] {
	d.advance(now)
	for {
		src := d.nextDue()
		if src == nil || src.front().Due > now {
			return out
		}
		o := src.pop()
		d.C.OutSegs += int64(o.Segs * o.Copies)
		d.C.OutBytes += int64(o.Bytes * o.Copies)
		out = append(out, o)
	}
}

func (d *Direction[T]) nextDue() *fifo[Out[T]] {
	switch {
	case d.line.empty() && d.express.empty():
		return nil
	case d.line.empty():
		return &d.express
	case d.express.empty():
		return &d.line
	case d.express.front().Due < d.line.front().Due:
		return &d.express
	default:
		return &d.line
	}
}

// NextWake is the next time something happens without a new arrival (an item due, the rate
// freeing up, a timeline entry), or math.MaxInt64.
func (d *Direction[T]) NextWake() int64 {
	next := int64(math.MaxInt64)
	if src := d.nextDue(); src != nil {
		next = src.front().Due
	}
	if d.tlNext < len(d.timeline) {
		next = min(next, d.tlOrigin+d.timeline[d.tlNext].AtNs)
	}
	switch {
	case d.p.RateTrace != nil && (d.transit != nil || d.queue.len() > 0):
		next = min(next, d.oppTime(d.opportunityFor()))
	case d.p.RateBps > 0 && d.queue.len() > 0:
		next = min(next, max(d.linkFree, d.queue.front().arrival))
	}
	return next
}

// Backlog is what waits for the rate now: bytes and wire packets.
func (d *Direction[T]) Backlog() (int64, int) { return d.queuedBytes, d.queuedSegs }

// InFlight is how many items are propagating (released later).
func (d *Direction[T]) InFlight() int { return d.line.len() + d.express.len() }

// At is the latest time the model has advanced to: an item may arrive no earlier.
func (d *Direction[T]) At() int64 { return d.at }

// advance applies the timeline entries due by now, serving the queue up to each, then up to now.
func (d *Direction[T]) advance(now int64) {
	d.at = max(d.at, now)
	for d.tlNext < len(d.timeline) {
		entry := d.timeline[d.tlNext]
		at := d.tlOrigin + entry.AtNs
		if at > now {
			break
		}
		d.SetParams(entry.Params, at)
		d.applied = append(d.applied, Applied{Index: d.tlNext, Label: entry.Label, AtNs: at})
		d.tlNext++
	}
	d.serve(now)
}

// toLine puts an item that left the queue at departAt onto the wire: it is due after the
// (traced) delay plus jitter, never before the item ahead of it, unless it is reordered
// (netem: sent at once, ahead of the others).
func (d *Direction[T]) toLine(it Item[T], copies int, departAt int64) {
	p := &d.p
	if p.Reorder > 0 {
		gap := max(p.ReorderGap, 1)
		if d.reorderCount < gap-1 || !d.rnd.order.flip(p.Reorder, p.ReorderCorrelation) {
			d.reorderCount++
		} else {
			d.reorderCount = 0
			d.C.Reordered += int64(it.Segs)
			d.express.push(Out[T]{Item: it, Due: departAt, Copies: copies})
			return
		}
	}
	delay := float64(d.baseDelay(departAt))
	if p.JitterNs > 0 {
		z := d.rnd.jitter.next(p.JitterCorrelation)
		delay += float64(p.JitterNs) * Standardized(p.JitterDistribution, p.JitterTable, z)
	}
	due := max(departAt+clampDelay(delay), d.lastDue)
	d.lastDue = due
	d.line.push(Out[T]{Item: it, Due: due, Copies: copies})
}

func (d *Direction[T]) baseDelay(t int64) int64 {
	tr := d.p.DelayTrace
	if tr == nil {
		return d.p.DelayNs
	}
	within := (t - d.delayOrigin) % tr.PeriodNs
	if within < 0 {
		within += tr.PeriodNs
	}
	i := sort.Search(len(tr.TNs), func(i int) bool { return tr.TNs[i] > within }) - 1
	return tr.DelayNs[max(i, 0)]
}
