package linkpath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"labkit/go/internal/link"
)

// The exporter writes what the emulator did, so that the testbed checks itself and every run
// can record the emulator's summary for its own time window:
//   - STATS (JSON lines): per second with activity, per direction, the wire packets in and
//     out, drops by cause, duplicates, reorders, the queue's peak, and a histogram of how late
//     packets were written (µs buckets); the timeline entries applied in that second;
//   - STATUS (JSON, rewritten every second): the parameters in effect, totals since start,
//     lateness percentiles since start, and the config generation in effect.
type exporter struct {
	e          *Emulator
	mu         sync.Mutex
	generation int
	reloadErr  string
	prev       map[string]link.Counters
	prevUnr    map[string]int64
	total      map[string]*Hist
	writeDrops map[string]int64
	stats      *os.File
}

// encodeLine writes v as one JSON line, without HTML escaping (direction keys hold '>').
func encodeLine(f *os.File, v any) error {
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

type dirSecond struct {
	In               int64            `json:"in"`
	InBytes          int64            `json:"in_bytes"`
	Out              int64            `json:"out"`
	OutBytes         int64            `json:"out_bytes"`
	Drop             map[string]int64 `json:"drop"`
	Dup              int64            `json:"dup"`
	Reorder          int64            `json:"reorder"`
	QueuePeakBytes   int64            `json:"queue_peak_bytes"`
	QueuePeakPackets int              `json:"queue_peak_packets"`
	Late             lateSecond       `json:"late"`
	Sojourn          *sojournSecond   `json:"sojourn,omitempty"`
}

// sojournSecond is the queue's wait in one direction, per millisecond of arrival (UTC ms since the epoch, in
// order): the longest wait of the packets that arrived in it, in µs. labkit explain reads what a call waited.
type sojournSecond struct {
	TMs    []int64   `json:"t_ms"`
	WaitUs []float64 `json:"wait_us"`
}

type lateSecond struct {
	N     int64            `json:"n"`
	MaxUs float64          `json:"max_us"`
	Hist  map[string]int64 `json:"hist"`
}

type eventRecord struct {
	Direction    string `json:"direction"`
	Label        string `json:"label"`
	Index        int    `json:"index"`
	DueUTCNs     int64  `json:"due_utc_ns"`
	AppliedUTCNs int64  `json:"applied_utc_ns"`
}

type secondRecord struct {
	TUTCNs     int64                `json:"t_utc_ns"`
	Directions map[string]dirSecond `json:"d"`
	Events     []eventRecord        `json:"events,omitempty"`
	Unroutable map[string]int64     `json:"unroutable,omitempty"`
}

func newExporter(e *Emulator) *exporter {
	x := &exporter{e: e, generation: e.cfg.Generation, prev: map[string]link.Counters{}, prevUnr: map[string]int64{},
		total: map[string]*Hist{}, writeDrops: map[string]int64{}}
	for _, d := range e.dirs {
		x.total[d.key] = NewHist()
	}
	if e.cfg.StatsPath != "" {
		f, err := os.OpenFile(e.cfg.StatsPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "labkit-go link: stats file: %v\n", err)
		} else {
			x.stats = f
		}
	}
	return x
}

func (x *exporter) setGeneration(g int, reloadErr string) {
	x.mu.Lock()
	if reloadErr == "" {
		x.generation = g
	}
	x.reloadErr = reloadErr
	x.mu.Unlock()
	x.flush()
}

// run flushes every second from a thread set up like the data path's: it takes their locks,
// and a holder that a busy machine preempts would keep them spinning.
func (x *exporter) run() {
	x.e.threadSetup()
	next := time.Now()
	for {
		next = next.Add(time.Second)
		time.Sleep(time.Until(next))
		x.flush()
	}
}

// flush writes the second that has passed and the status.
func (x *exporter) flush() {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.e
	rec := secondRecord{TUTCNs: e.UTC(e.Now()), Directions: map[string]dirSecond{}, Unroutable: map[string]int64{}}
	status := map[string]any{}
	for _, d := range e.dirs {
		second, dirStatus, events := x.collect(d)
		if second != nil {
			rec.Directions[d.key] = *second
		}
		rec.Events = append(rec.Events, events...)
		status[d.key] = dirStatus
	}
	unroutable := map[string]int64{}
	stamps := map[string]any{}
	for _, h := range e.hosts {
		h.waitMu.Lock()
		wait := h.readWait
		stamps[h.cfg.Name] = map[string]any{"tap": h.tap != nil, "stamped": wait.N,
			"read_wait_us": map[string]any{"p50": wait.QuantileUs(0.5), "p99": wait.QuantileUs(0.99),
				"max": float64(wait.MaxNs) / 1e3}}
		h.waitMu.Unlock()
		n := h.unroutable.Load()
		unroutable[h.cfg.Name] = n
		if delta := n - x.prevUnr[h.cfg.Name]; delta > 0 {
			rec.Unroutable[h.cfg.Name] = delta
		}
		x.prevUnr[h.cfg.Name] = n
	}
	if x.stats != nil && (len(rec.Directions) > 0 || len(rec.Events) > 0 || len(rec.Unroutable) > 0) {
		_ = encodeLine(x.stats, rec)
	}
	x.writeStatus(status, unroutable, stamps)
}

func (x *exporter) collect(d *direction) (*dirSecond, map[string]any, []eventRecord) {
	d.mu.Lock()
	c := d.model.C
	peakBytes, peakSegs := d.model.TakeQueuePeak()
	sojourn := d.model.TakeSojourn()
	backlogBytes, backlogSegs := d.model.Backlog()
	inFlight := d.model.InFlight()
	params := d.model.Params()
	d.mu.Unlock()
	d.statMu.Lock()
	hist, writeDrops, applied, writeErr := d.lateness, d.writeDrops, d.events, d.writeErr
	d.lateness, d.writeDrops, d.events = NewHist(), 0, nil
	d.statMu.Unlock()

	p := x.prev[d.key]
	x.prev[d.key] = c
	x.total[d.key].Merge(hist)
	x.writeDrops[d.key] += writeDrops
	var events []eventRecord
	for _, a := range applied {
		events = append(events, eventRecord{d.key, a.Label, a.Index, x.e.UTC(a.AtNs), x.e.UTC(a.seenNs)})
	}
	total := x.total[d.key]
	status := map[string]any{
		"params": params, "backlog_bytes": backlogBytes, "backlog_packets": backlogSegs, "in_flight": inFlight,
		"totals": countersMap(c, x.writeDrops[d.key]), "write_error": writeErr,
		"lateness_us": map[string]any{"n": total.N, "p50": total.QuantileUs(0.5), "p99": total.QuantileUs(0.99),
			"max": float64(total.MaxNs) / 1e3},
	}
	if c == p && hist.N == 0 && writeDrops == 0 && len(sojourn) == 0 {
		return nil, status, events
	}
	second := &dirSecond{
		In: c.InSegs - p.InSegs, InBytes: c.InBytes - p.InBytes, Out: c.OutSegs - p.OutSegs, OutBytes: c.OutBytes - p.OutBytes,
		Drop: map[string]int64{"partition": c.DropPartition - p.DropPartition, "loss": c.DropLoss - p.DropLoss,
			"queue": c.DropQueue - p.DropQueue, "aqm": c.DropAQM - p.DropAQM, "write": writeDrops},
		Dup: c.Duplicated - p.Duplicated, Reorder: c.Reordered - p.Reordered,
		QueuePeakBytes: peakBytes, QueuePeakPackets: peakSegs,
		Late: lateSecond{N: hist.N, MaxUs: float64(hist.MaxNs) / 1e3, Hist: map[string]int64{}},
	}
	for k, v := range hist.Counts {
		second.Late.Hist[strconv.FormatInt(k, 10)] = v
	}
	if len(sojourn) > 0 {
		ms := slices.Sorted(maps.Keys(sojourn))
		second.Sojourn = &sojournSecond{TMs: make([]int64, len(ms)), WaitUs: make([]float64, len(ms))}
		for i, m := range ms {
			second.Sojourn.TMs[i] = x.e.UTC(m*1e6) / 1e6
			second.Sojourn.WaitUs[i] = float64(sojourn[m]) / 1e3
		}
	}
	return second, status, events
}

func countersMap(c link.Counters, writeDrops int64) map[string]int64 {
	return map[string]int64{"in": c.InSegs, "in_bytes": c.InBytes, "out": c.OutSegs, "out_bytes": c.OutBytes,
		"drop_partition": c.DropPartition, "drop_loss": c.DropLoss, "drop_queue": c.DropQueue, "drop_aqm": c.DropAQM,
		"drop_write": writeDrops, "duplicated": c.Duplicated, "reordered": c.Reordered}
}

func (x *exporter) writeStatus(dirs map[string]any, unroutable map[string]int64, stamps map[string]any) {
	path := x.e.cfg.StatusPath
	if path == "" {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	_ = enc.Encode(map[string]any{
		"pid": os.Getpid(), "generation": x.generation, "reload_error": x.reloadErr,
		"started_utc_ns": x.e.start.UnixNano(), "t_utc_ns": x.e.UTC(x.e.Now()),
		"realtime": x.e.realtime.Load(), "offload": x.e.cfg.Offload, "spin_ns": x.e.cfg.SpinNs, "seed": x.e.cfg.Seed,
		"directions": dirs, "unroutable": unroutable, "send_stamps": stamps,
	})
	tmp := path + ".tmp"
	if os.WriteFile(tmp, buf.Bytes(), 0o644) == nil {
		_ = os.Rename(tmp, path)
	}
}
