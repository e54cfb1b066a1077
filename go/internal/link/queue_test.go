package link

import (
	"math"
	"testing"
)

func TestRateSerialisesBackToBackPackets(t *testing.T) {
	// 12 Mbit/s: a 1500-byte packet takes 1 ms, then propagates 5 ms.
	d := NewDirection[int](Params{DelayNs: 5 * ms, RateBps: 12e6}, 1, 0)
	for i := 0; i < 4; i++ {
		d.Enqueue(0, item(i, 1500))
	}
	if b, s := d.Backlog(); s != 3 || b != 4500 {
		t.Fatalf("backlog %d B %d packets: the first is in transmission, three wait", b, s)
	}
	out := drain(d, msAt(100))
	for i, o := range out {
		if want := int64(i+1)*ms + 5*ms; o.Due != want {
			t.Errorf("packet %d due %d, want %d", i, o.Due, want)
		}
	}
	// An idle link sends a new packet at once.
	d.Enqueue(msAt(200), item(9, 1500))
	if o := drain(d, msAt(300)); o[0].Due != msAt(206) {
		t.Errorf("after idle: due %d", o[0].Due)
	}
}

func TestQueueLimitInPacketsAndBytesTailDrops(t *testing.T) {
	d := NewDirection[int](Params{RateBps: 12e6, QueuePackets: 2}, 1, 0)
	var causes []Cause
	for i := 0; i < 5; i++ {
		causes = append(causes, d.Enqueue(0, item(i, 1500)))
	}
	// One in transmission, two queued, the rest dropped at the tail.
	want := []Cause{Accepted, Accepted, Accepted, DropQueue, DropQueue}
	for i := range want {
		if causes[i] != want[i] {
			t.Fatalf("causes %v, want %v", causes, want)
		}
	}
	if d.C.DropQueue != 2 {
		t.Errorf("queue drops %d", d.C.DropQueue)
	}
	b := NewDirection[int](Params{RateBps: 12e6, QueueBytes: 2000}, 1, 0)
	b.Enqueue(0, item(0, 1500))
	b.Enqueue(0, item(1, 1500))
	if b.Enqueue(0, item(2, 600)) != DropQueue || b.Enqueue(0, item(3, 500)) != Accepted {
		t.Error("a byte limit admits what fits")
	}
	peakBytes, peakSegs := b.TakeQueuePeak()
	if peakBytes != 2000 || peakSegs != 2 {
		t.Errorf("peak %d B %d packets", peakBytes, peakSegs)
	}
}

func TestThroughputOfAFullLinkIsItsRate(t *testing.T) {
	// A sender that always keeps the queue non-empty gets exactly the rate.
	d := NewDirection[int](Params{RateBps: 100e6, QueuePackets: 100, DelayNs: 50 * ms}, 1, 0)
	var delivered int64
	for now := int64(0); now < msAt(1000); now += 100_000 {
		for i := 0; i < 2; i++ {
			d.Enqueue(now, item(0, 1500))
		}
		for _, o := range d.Release(now, nil) {
			delivered += int64(o.Bytes)
		}
	}
	got := float64(delivered*8) / 0.95 // bits over the 950 ms after the first delay
	if math.Abs(got-100e6)/100e6 > 0.01 {
		t.Errorf("throughput %.1f Mbit/s", got/1e6)
	}
}

func TestCodelDropsAStandingQueueButNotABurst(t *testing.T) {
	p := Params{RateBps: 12e6, AQM: "codel", MTU: 1500}
	// A burst of 20 packets (20 ms of queue) once: above target, but gone within an interval.
	burst := NewDirection[int](p, 1, 0)
	for i := 0; i < 20; i++ {
		burst.Enqueue(0, item(i, 1500))
	}
	drain(burst, msAt(100))
	if burst.C.DropAQM != 0 {
		t.Errorf("a single burst lost %d packets to CoDel", burst.C.DropAQM)
	}
	// Twice the rate for 2 s (an unresponsive sender): the sojourn passes the 5 ms target at
	// ~10 ms, CoDel starts an interval later and then drops at interval/sqrt(count), so that by
	// T after its first drop it has dropped N packets with sum_{k<=N} interval/sqrt(k) = T, i.e.
	// interval(2 sqrt(N) + zeta(1/2)) = T.
	d := NewDirection[int](p, 1, 0)
	for now := int64(0); now < msAt(2000); now += 500_000 {
		d.Enqueue(now, item(0, 1500))
		d.Release(now, nil)
	}
	if want := math.Pow((1.89/0.1+1.4604)/2, 2); math.Abs(float64(d.C.DropAQM)-want)/want > 0.05 {
		t.Errorf("CoDel dropped %d, its control law gives %.0f", d.C.DropAQM, want)
	}
	// Droptail with no limit keeps the whole overload instead.
	tail := NewDirection[int](Params{RateBps: 12e6}, 1, 0)
	for now := int64(0); now < msAt(2000); now += 500_000 {
		tail.Enqueue(now, item(0, 1500))
	}
	if b, _ := tail.Backlog(); float64(b*8)/12e6 < 0.9 || tail.C.DropAQM != 0 {
		t.Errorf("droptail queue only %.0f ms", float64(b*8)/12e6*1e3)
	}
}

func TestRateTraceDeliversMahimahiOpportunities(t *testing.T) {
	// Opportunities at 1, 2, 2 and 5 ms, repeating every 5 ms.
	d := NewDirection[int](Params{RateTrace: &RateTrace{Ms: []int64{1, 2, 2, 5}}}, 1, 0)
	d.Enqueue(0, item(0, 1500))
	d.Enqueue(0, item(1, 3000)) // needs two opportunities
	d.Enqueue(0, item(2, 100))
	var dues []int64
	for _, o := range drain(d, msAt(50)) {
		dues = append(dues, o.Due)
	}
	// 0 at 1 ms; 1 takes the two at 2 ms (1504 + 1496 of the second); 2 gets the 8 bytes left
	// there and the rest at 5 ms.
	if len(dues) != 3 || dues[0] != msAt(1) || dues[1] != msAt(2) || dues[2] != msAt(5) {
		t.Fatalf("dues %v", dues)
	}
	// An opportunity with nothing queued is lost: a packet arriving at 5.5 ms waits for 6 ms (1 + 5).
	d.Enqueue(5_500_000, item(3, 1500))
	if o := drain(d, msAt(50)); len(o) != 1 || o[0].Due != msAt(6) {
		t.Fatalf("after the loop: %+v", o)
	}
	// Long idle: the next opportunity is found without walking every one in between.
	d.Enqueue(msAt(1_000_000)+1, item(4, 100))
	if o := drain(d, msAt(1_000_010)); len(o) != 1 || o[0].Due != msAt(1_000_001) {
		t.Fatalf("after idle: %+v", o)
	}
}

func TestRateTraceThroughputIsOnePacketPerOpportunity(t *testing.T) {
	d := NewDirection[int](Params{RateTrace: &RateTrace{Ms: []int64{1}}, QueuePackets: 1000}, 1, 0)
	delivered := 0
	for now := int64(0); now < msAt(1000); now += 250_000 {
		d.Enqueue(now, item(0, 1504))
		delivered += len(d.Release(now, nil))
	}
	if delivered < 998 || delivered > 1000 {
		t.Errorf("%d packets in 1000 opportunities", delivered)
	}
}

func TestDelayTraceIsAStepFunctionThatLoops(t *testing.T) {
	tr := &DelayTrace{TNs: []int64{0, msAt(10), msAt(20)}, DelayNs: []int64{msAt(5), msAt(8), msAt(6)}, PeriodNs: msAt(30)}
	d := NewDirection[int](Params{DelayTrace: tr}, 1, msAt(100))
	for _, c := range []struct{ at, want int64 }{{100, 5}, {109, 5}, {110, 8}, {125, 6}, {131, 5}, {141, 8}} {
		d.Enqueue(msAt(c.at), item(0, 100))
		o := drain(d, msAt(1000))
		if got := o[0].Due - msAt(c.at); got != msAt(c.want) {
			t.Errorf("sent at %d ms: delay %d ns, want %d ms", c.at, got, c.want)
		}
	}
}

func TestTimelineAppliesChangesAtTheirTimesAndPartitions(t *testing.T) {
	base := Params{DelayNs: 1 * ms}
	cut := base
	cut.Partition = true
	slow := base
	slow.DelayNs = 50 * ms
	timeline := []Timed{{AtNs: msAt(30), Label: "partition", Params: cut}, {AtNs: msAt(35), Label: "heal", Params: slow}}
	d := NewDirection[int](base, 1, 0)
	d.Configure(base, timeline, msAt(10), 0)
	if d.NextWake() != msAt(40) {
		t.Fatalf("next wake %d: the partition is due at 40 ms", d.NextWake())
	}
	var lost []int
	for i := 0; i < 60; i++ {
		if d.Enqueue(msAt(int64(i)), item(i, 100)) == DropPartition {
			lost = append(lost, i)
		}
	}
	if len(lost) != 5 || lost[0] != 40 || lost[4] != 44 {
		t.Fatalf("lost %v, want exactly those sent in [40, 45) ms", lost)
	}
	applied := d.TakeApplied()
	if len(applied) != 2 || applied[0].AtNs != msAt(40) || applied[1].Label != "heal" || applied[1].AtNs != msAt(45) {
		t.Fatalf("applied %+v", applied)
	}
	if d.Params().DelayNs != 50*ms || d.C.DropPartition != 5 {
		t.Errorf("after the timeline: %+v, %+v", d.Params(), d.C)
	}
	// Configured late, a direction starts with what the timeline says by then.
	late := NewDirection[int](base, 1, 0)
	late.Configure(base, timeline, msAt(10), msAt(42))
	if !late.Params().Partition || late.NextWake() != msAt(45) {
		t.Errorf("configured at 42 ms: %+v", late.Params())
	}
}

func TestLoweringTheDelayLiveKeepsOrder(t *testing.T) {
	d := NewDirection[int](Params{DelayNs: 100 * ms}, 1, 0)
	d.Enqueue(0, item(0, 100))
	d.SetParams(Params{DelayNs: 10 * ms}, ms)
	d.Enqueue(ms, item(1, 100))
	out := drain(d, msAt(200))
	if out[0].V != 0 || out[1].Due != msAt(100) {
		t.Fatalf("%+v: the later packet must wait for the earlier one", out)
	}
}

func TestMaxSegmentsFollowsWhatTheModelDecidesPerPacket(t *testing.T) {
	cases := []struct {
		p    Params
		want int
	}{
		{Params{DelayNs: ms}, 0},
		{Params{DelayNs: ms, Loss: Loss{P: 0.01}}, 1},
		{Params{JitterNs: 1}, 1},
		{Params{RateBps: 1e9, MTU: 1500}, 8},
		{Params{RateBps: 1e6}, 1},
		{Params{RateBps: 1e9, AQM: "codel"}, 1},
	}
	for _, c := range cases {
		if got := c.p.MaxSegments(); got != c.want {
			t.Errorf("%+v: %d, want %d", c.p, got, c.want)
		}
	}
}

func TestValidateRejectsNonsense(t *testing.T) {
	bad := []Params{
		{Duplicate: 1.5},
		{Loss: Loss{Model: "gemodel", P: -0.1}},
		{JitterCorrelation: 1},
		{JitterDistribution: "table"},
		{JitterDistribution: "cauchy"},
		{AQM: "pie"},
		{DelayTrace: &DelayTrace{TNs: []int64{0}, DelayNs: []int64{1}, PeriodNs: 0}},
		{RateTrace: &RateTrace{Ms: []int64{0}}},
	}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v passed", p)
		}
	}
	good := Params{DelayNs: ms, JitterNs: 1, JitterDistribution: "paretonormal", Loss: Loss{Model: "gemodel", P: 0.1, R: 0.9, BadLoss: 1}}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}

func TestSojournIsEachArrivalMillisecondsLongestWaitInTheQueue(t *testing.T) {
	// 12 Mbit/s: a 1500-byte packet takes 1 ms. Four at once at 0: they start at 0, 1, 2 and 3 ms.
	d := NewDirection[int](Params{DelayNs: 5 * ms, RateBps: 12e6}, 1, 0)
	for i := 0; i < 4; i++ {
		d.Enqueue(0, item(i, 1500))
	}
	// One at 10.5 ms finds the link idle; nothing waits for it.
	d.Enqueue(msAt(10)+ms/2, item(9, 1500))
	drain(d, msAt(100))
	got := d.TakeSojourn()
	if len(got) != 2 || got[0] != 3*ms || got[10] != 0 {
		t.Fatalf("sojourn by arrival ms %v, want {0: 3 ms, 10: 0}", got)
	}
	if again := d.TakeSojourn(); len(again) != 0 {
		t.Errorf("taken twice: %v", again)
	}
	// Without a rate nothing queues, and nothing is noted.
	free := NewDirection[int](Params{DelayNs: 5 * ms}, 1, 0)
	free.Enqueue(0, item(0, 1500))
	drain(free, msAt(100))
	if s := free.TakeSojourn(); len(s) != 0 {
		t.Errorf("no queue, yet %v", s)
	}
}
