// Package linkpath is the testbed's data path: it reads packets from every host's TUN device,
// hands each to the link model (go/internal/link) of its direction, and writes it into the
// destination's TUN device when the model says it is due. One thread reads each device;
// one thread per direction sleeps until its next due time, spins the last few microseconds,
// and writes. Both run SCHED_FIFO where allowed, like the softirq netem runs in (see
// becomeRealtime), and make their system calls raw (see rawRead). A packet's delay counts from
// when its host sent it, as its tap saw (tap_linux.go), not from when the reader woke up.
package linkpath

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"labkit/go/internal/link"
)

const (
	maxPacket  = VnetHdrLen + 65535
	smallLimit = 2048
)

var (
	bigPool   = sync.Pool{New: func() any { b := make([]byte, maxPacket); return &b }}
	smallPool = sync.Pool{New: func() any { b := make([]byte, smallLimit); return &b }}
)

func getBuf(n int) []byte {
	if n <= smallLimit {
		return (*smallPool.Get().(*[]byte))[:n]
	}
	return (*bigPool.Get().(*[]byte))[:n]
}

func putBuf(b []byte) {
	b = b[:cap(b)]
	switch cap(b) {
	case smallLimit:
		smallPool.Put(&b)
	case maxPacket:
		bigPool.Put(&b)
	}
}

// Emulator runs every direction of a testbed's links.
type Emulator struct {
	start    time.Time // the model's clock is nanoseconds since start (monotonic)
	cfg      *Config
	hosts    []*host
	dirs     []*direction
	realtime atomic.Bool
	stats    *exporter
}

type host struct {
	cfg        HostConfig
	fd         int
	tap        *tap                  // nil: delays count from when the reader reads a packet
	routes     map[uint32]*direction // destination address -> direction
	unroutable atomic.Int64

	waitMu   spinLock // guards readWait
	readWait *Hist    // how long stamped packets waited in the TUN device for the reader
}

type direction struct {
	key     string
	out     *host
	wake    *waker
	mu      spinLock // guards model and planned
	model   *link.Direction[[]byte]
	planned int64 // when the scheduler thread means to wake next
	maxSegs atomic.Int64
	spinNs  int64
	spin    spinBudget

	statMu     spinLock // guards what the scheduler thread records for the exporter
	lateness   *Hist
	writeDrops int64
	events     []appliedEvent
	writeErr   string
}

type appliedEvent struct {
	link.Applied
	seenNs int64
}

// Now is the model's clock: nanoseconds since the emulator started.
func (e *Emulator) Now() int64 { return int64(time.Since(e.start)) }

// UTC converts a model time to wall-clock nanoseconds.
func (e *Emulator) UTC(t int64) int64 { return e.start.UnixNano() + t }

// Start opens every host's TUN device and starts the threads; the devices exist when it returns.
func Start(cfg *Config) (*Emulator, error) {
	e := &Emulator{start: time.Now(), cfg: cfg}
	byName := map[string]*host{}
	for _, hc := range cfg.Hosts {
		fd, err := openTUN(hc.Netns, hc.Ifname, cfg.Offload)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", hc.Name, err)
		}
		h := &host{cfg: hc, fd: fd, routes: map[uint32]*direction{}, readWait: NewHist()}
		if h.tap, err = openTap(hc.Netns, hc.Ifname); err != nil {
			fmt.Fprintf(os.Stderr, "labkit-go link: %v; delays count from when packets are read\n", err)
		}
		e.hosts = append(e.hosts, h)
		byName[hc.Name] = h
	}
	now := e.Now()
	for i, dc := range cfg.Directions {
		w, err := newWaker()
		if err != nil {
			return nil, err
		}
		d := &direction{key: dc.Key(), out: byName[dc.To], wake: w, spinNs: cfg.SpinNs, lateness: NewHist(),
			model: link.NewDirection[[]byte](dc.Params, cfg.Seed*1000003+uint64(i), now), planned: math.MaxInt64}
		d.model.Configure(dc.Params, dc.Timeline, cfg.ScheduleOriginUTCNs-e.start.UnixNano(), now)
		d.maxSegs.Store(int64(d.model.Params().MaxSegments()))
		e.dirs = append(e.dirs, d)
		addr := byName[dc.To].cfg.Address
		byName[dc.From].routes[ipv4Key(addr)] = d
	}
	e.stats = newExporter(e)
	e.realtime.Store(cfg.Realtime)
	// Each reader and scheduler is a locked thread that needs a P to run Go code when its
	// syscall returns; with fewer Ps than busy threads it would queue for one behind the
	// others for milliseconds, however high its priority.
	runtime.GOMAXPROCS(max(runtime.NumCPU(), 2*(len(e.hosts)+len(e.dirs))+4))
	for _, d := range e.dirs {
		go e.schedule(d)
	}
	for _, h := range e.hosts {
		go e.read(h)
	}
	e.stats.flush() // the status file exists once the devices do
	go e.stats.run()
	return e, nil
}

func ipv4Key(addr string) uint32 {
	var a [4]byte
	fmt.Sscanf(addr, "%d.%d.%d.%d", &a[0], &a[1], &a[2], &a[3])
	return binary.BigEndian.Uint32(a[:])
}

func (e *Emulator) threadSetup() {
	runtime.LockOSThread()
	if e.cfg.Realtime && !becomeRealtime() {
		e.realtime.Store(false)
	}
}

// read takes every packet host h sends and hands it to the direction its destination names.
func (e *Emulator) read(h *host) {
	e.threadSetup()
	buf := getBuf(maxPacket)
	for {
		n, err := rawRead(h.fd, buf)
		if err == unix.EAGAIN {
			rawPoll(h.fd, maxBlock)
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err != 0 {
			fmt.Fprintf(os.Stderr, "labkit-go link: reading host %s: %v\n", h.cfg.Name, err)
			return
		}
		t := time.Now()
		now := int64(t.Sub(e.start))
		if n < VnetHdrLen+20 || buf[VnetHdrLen]>>4 != 4 {
			h.unroutable.Add(1)
			continue
		}
		d := h.routes[binary.BigEndian.Uint32(buf[VnetHdrLen+16:])]
		if d == nil {
			h.unroutable.Add(1)
			continue
		}
		buf = d.admit(h.sentAt(t, now, buf[VnetHdrLen:n]), buf[:n])
		buf = buf[:cap(buf)]
	}
}

// sentAt is when host h handed ip to its device, on the model's clock, as its tap saw it;
// else now (t on the wall clock), when the reader read it.
func (h *host) sentAt(t time.Time, now int64, ip []byte) int64 {
	if h.tap == nil {
		return now
	}
	wall, ok := h.tap.sentAt(ip)
	if !ok {
		return now
	}
	wait := min(max(t.UnixNano()-wall, 0), tapMaxAge)
	h.waitMu.Lock()
	h.readWait.Add(wait)
	h.waitMu.Unlock()
	return now - wait
}

// admit hands the packet in b (virtio header first), sent at sent, to the model, cut into
// chunks where the model decides per packet; it returns a buffer for the next read.
func (d *direction) admit(sent int64, b []byte) []byte {
	hdr, ip := decodeVnet(b), b[VnetHdrLen:]
	if limit := int(d.maxSegs.Load()); limit > 0 {
		if l, super, err := tcp4Super(hdr, ip); err == nil && super && len(ip)-l.hdrLen > limit*l.gsoSize {
			splitTCP4(l, ip, limit, getBuf, func(chunk []byte) { d.enqueue(sent, chunk) })
			return b
		}
	}
	if len(b) <= smallLimit {
		small := getBuf(len(b))
		copy(small, b)
		d.enqueue(sent, small)
		return b
	}
	d.enqueue(sent, b)
	return getBuf(maxPacket)
}

func (d *direction) enqueue(sent int64, b []byte) {
	segs, bytes := wireSize(decodeVnet(b), b[VnetHdrLen:])
	d.mu.Lock()
	// The model's clock only goes forward: a packet sent before what it last did arrives then.
	cause := d.model.Enqueue(max(sent, d.model.At()), link.Item[[]byte]{V: b, Bytes: bytes, Segs: segs})
	next := d.model.NextWake()
	signal := next < d.planned
	if signal {
		d.planned = next
	}
	d.mu.Unlock()
	if cause != link.Accepted {
		putBuf(b)
	}
	if signal {
		d.wake.wake()
	}
}

// schedule is direction d's thread: release what is due, write it, sleep until the next due time.
func (e *Emulator) schedule(d *direction) {
	e.threadSetup()
	var outs []link.Out[[]byte]
	for {
		d.mu.Lock()
		outs = d.model.Release(e.Now(), outs[:0])
		next := d.model.NextWake()
		d.planned = next
		applied := d.model.TakeApplied()
		if len(applied) > 0 {
			d.maxSegs.Store(int64(d.model.Params().MaxSegments()))
		}
		d.mu.Unlock()
		if len(applied) > 0 {
			d.recordApplied(applied, e.Now())
		}
		for i := range outs {
			d.deliver(e, &outs[i])
			outs[i] = link.Out[[]byte]{}
		}
		if len(outs) > 0 {
			continue
		}
		d.waitUntil(e, next)
	}
}

func (d *direction) recordApplied(applied []link.Applied, seen int64) {
	d.statMu.Lock()
	for _, a := range applied {
		d.events = append(d.events, appliedEvent{a, seen})
	}
	d.statMu.Unlock()
}

func (d *direction) deliver(e *Emulator, o *link.Out[[]byte]) {
	late := e.Now() - o.Due
	var failed unix.Errno
	for c := 0; c < o.Copies; c++ {
		if _, err := rawWrite(d.out.fd, o.V); err != 0 {
			failed = err
		}
	}
	putBuf(o.V)
	d.statMu.Lock()
	d.lateness.Add(late)
	if failed != 0 {
		d.writeDrops += int64(o.Segs)
		d.writeErr = failed.Error()
	}
	d.statMu.Unlock()
}

// waitUntil sleeps until next (or a wake-up), spinning the last spinNs so that the write
// is not late by a timer's wake-up latency.
func (d *direction) waitUntil(e *Emulator, next int64) {
	if next == math.MaxInt64 {
		d.wake.sleep(maxBlock)
		return
	}
	now := e.Now()
	spin := d.spin.left(now, d.spinNs)
	if gap := next - now; gap > spin {
		d.wake.sleep(time.Duration(gap - spin))
	}
	start := e.Now()
	now = start
	for now < next && now-start < spin {
		now = e.Now()
	}
	d.spin.used += now - start
}

// spinBudget bounds busy-waiting to spinBudgetNs in every second: enough to write idle
// traffic on time to the microsecond, while under load (packets due every few microseconds)
// the thread sleeps instead of spinning a core away from the traffic it carries.
type spinBudget struct{ second, used int64 }

const spinBudgetNs = 50_000_000

// left is how long the thread may still spin this second, at most want.
func (s *spinBudget) left(now, want int64) int64 {
	if now/1e9 != s.second {
		s.second, s.used = now/1e9, 0
	}
	return max(0, min(want, spinBudgetNs-s.used))
}

// Reload applies a new config's parameters and timelines to the running directions (hosts
// and directions must be the same; labkit rebuilds the testbed otherwise).
func (e *Emulator) Reload(cfg *Config) (err error) {
	e.onDataPathThread(func() { err = e.reload(cfg) })
	return err
}

// onDataPathThread runs f on a thread set up like the data path's (see spinLock) and waits.
func (e *Emulator) onDataPathThread(f func()) {
	done := make(chan struct{})
	go func() {
		e.threadSetup() // the thread ends with the goroutine: it stays locked
		f()
		close(done)
	}()
	<-done
}

func (e *Emulator) reload(cfg *Config) error {
	if len(cfg.Hosts) != len(e.cfg.Hosts) || len(cfg.Directions) != len(e.dirs) {
		return fmt.Errorf("the new config has other hosts or links; restart the emulator")
	}
	now := e.Now()
	for i, dc := range cfg.Directions {
		d := e.dirs[i]
		if dc.Key() != d.key {
			return fmt.Errorf("direction %s is now %s; restart the emulator", d.key, dc.Key())
		}
	}
	for i, dc := range cfg.Directions {
		d := e.dirs[i]
		d.mu.Lock()
		d.model.Configure(dc.Params, dc.Timeline, cfg.ScheduleOriginUTCNs-e.start.UnixNano(), now)
		d.maxSegs.Store(int64(d.model.Params().MaxSegments()))
		d.planned = math.MinInt64
		d.mu.Unlock()
		d.wake.wake()
	}
	e.stats.setGeneration(cfg.Generation, "")
	return nil
}

// RefuseReload records in the status file that a new config was refused.
func (e *Emulator) RefuseReload(err error) {
	e.onDataPathThread(func() { e.stats.setGeneration(0, err.Error()) })
}

// Close writes the last counters; the devices go when the process exits.
func (e *Emulator) Close() { e.onDataPathThread(e.stats.flush) }
