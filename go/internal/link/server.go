package link

import (
	"math"
	"sort"
)

// serve moves items from the queue onto the wire up to now. With a fixed rate the link is a
// single server: an item starts when the one before it has left (or when it arrives) and
// takes size·8/rate; it propagates from the end of its transmission. Every decision is
// taken at the virtual time it belongs to, never later, so the schedule does not depend on
// how often serve is called.
func (d *Direction[T]) serve(now int64) {
	switch {
	case d.p.RateTrace != nil:
		d.serveTrace(now)
	case d.p.RateBps > 0:
		for d.queue.len() > 0 {
			t := max(d.linkFree, d.queue.front().arrival)
			if t > now {
				return
			}
			q, ok := d.take(t)
			if !ok {
				continue
			}
			d.noteSojourn(q.arrival, t)
			d.linkFree = t + int64(float64(q.item.Bytes*q.copies)*8e9/d.p.RateBps)
			d.toLine(q.item, q.copies, d.linkFree)
		}
	default: // the rate was taken away: what waited leaves behind what is in transmission
		for d.queue.len() > 0 {
			q := d.popQueue()
			d.toLine(q.item, q.copies, max(d.linkFree, q.arrival))
		}
	}
}

// serveTrace serves the queue with Mahimahi's delivery opportunities: each carries up to
// 1504 bytes of the items that have arrived by then, an item larger than what is left
// continuing at the next one; an opportunity with nothing to send is lost.
func (d *Direction[T]) serveTrace(now int64) {
	for d.transit != nil || d.queue.len() > 0 {
		k := d.opportunityFor()
		t := d.oppTime(k)
		if t > now {
			return
		}
		d.nextOpp = k + 1
		credit := MahimahiPacketBytes
		for credit > 0 {
			if d.transit == nil {
				if d.queue.len() == 0 || d.queue.front().arrival > t {
					break
				}
				q, ok := d.take(t)
				if !ok {
					break
				}
				d.noteSojourn(q.arrival, t)
				d.transit = &q
			}
			sent := min(credit, d.transit.left)
			d.transit.left -= sent
			credit -= sent
			if d.transit.left == 0 {
				d.toLine(d.transit.item, d.transit.copies, t)
				d.transit = nil
			}
		}
	}
}

// opportunityFor is the index of the delivery opportunity the head of the link uses next:
// the next unused one, and for a new item not one before it arrived.
func (d *Direction[T]) opportunityFor() int64 {
	k := d.nextOpp
	if d.transit == nil && d.queue.len() > 0 {
		k = max(k, d.firstOppFrom(d.queue.front().arrival))
	}
	return k
}

func (d *Direction[T]) oppTime(k int64) int64 {
	ms := d.p.RateTrace.Ms
	n := int64(len(ms))
	return d.traceOrigin + (k/n)*ms[n-1]*1e6 + ms[k%n]*1e6
}

// firstOppFrom is the index of the first opportunity at or after t.
func (d *Direction[T]) firstOppFrom(t int64) int64 {
	ms := d.p.RateTrace.Ms
	n, period := int64(len(ms)), ms[len(ms)-1]*1e6
	rel := t - d.traceOrigin
	if rel <= 0 {
		return 0
	}
	cycles, within := rel/period, rel%period
	i := sort.Search(len(ms), func(i int) bool { return ms[i]*1e6 >= within })
	return cycles*n + int64(i)
}

func (d *Direction[T]) popQueue() queued[T] {
	q := d.queue.pop()
	d.queuedBytes -= int64(q.item.Bytes)
	d.queuedSegs -= q.item.Segs
	return q
}

// take dequeues the item the link sends at t: the head, or with CoDel what CoDel leaves.
func (d *Direction[T]) take(t int64) (queued[T], bool) {
	if d.p.AQM != "codel" {
		return d.popQueue(), true
	}
	return d.codelDequeue(t)
}

// codelState is RFC 8289's per-queue state.
type codelState struct {
	firstAbove, dropNext int64
	count, lastCount     int
	dropping             bool
}

// codelDo is RFC 8289's dodequeue at time t: the head if it has arrived by t, and whether
// CoDel may drop it (its sojourn has stayed above target for an interval).
func (d *Direction[T]) codelDo(t int64) (queued[T], bool, bool) {
	c := &d.codel
	if d.queue.len() == 0 || d.queue.front().arrival > t {
		c.firstAbove = 0
		return queued[T]{}, false, false
	}
	q := d.popQueue()
	target, interval := d.p.codelTimes()
	if t-q.arrival < target || d.bytesWaitingAt(t) <= int64(d.p.mtu()) {
		c.firstAbove = 0
		return q, false, true
	}
	if c.firstAbove == 0 {
		c.firstAbove = t + interval
		return q, false, true
	}
	return q, t >= c.firstAbove, true
}

// codelDequeue is RFC 8289's dequeue at time t: drops counted as DropAQM.
func (d *Direction[T]) codelDequeue(t int64) (queued[T], bool) {
	c := &d.codel
	_, interval := d.p.codelTimes()
	q, okToDrop, has := d.codelDo(t)
	if !has {
		c.dropping = false
		return q, false
	}
	if c.dropping {
		if !okToDrop {
			c.dropping = false
		}
		for c.dropping && t >= c.dropNext {
			d.C.DropAQM += int64(q.item.Segs)
			c.count++
			if q, okToDrop, has = d.codelDo(t); !has {
				c.dropping = false
				return q, false
			}
			if !okToDrop {
				c.dropping = false
			} else {
				c.dropNext = controlLaw(c.dropNext, c.count, interval)
			}
		}
	} else if okToDrop {
		d.C.DropAQM += int64(q.item.Segs)
		q, _, has = d.codelDo(t)
		c.dropping = true
		delta := c.count - c.lastCount
		c.count = 1
		if delta > 1 && t-c.dropNext < 16*interval {
			c.count = delta
		}
		c.dropNext = controlLaw(t, c.count, interval)
		c.lastCount = c.count
		if !has {
			return q, false
		}
	}
	return q, true
}

func controlLaw(t int64, count int, interval int64) int64 {
	return t + int64(float64(interval)/math.Sqrt(float64(count)))
}

// bytesWaitingAt is the bytes of the queued items that had arrived by t.
func (d *Direction[T]) bytesWaitingAt(t int64) int64 {
	n := d.queue.len()
	j := sort.Search(n, func(i int) bool { return d.queue.at(i).arrival > t })
	if j == 0 {
		return 0
	}
	first := d.queue.at(0)
	return d.queue.at(j-1).cum - first.cum + int64(first.item.Bytes)
}
