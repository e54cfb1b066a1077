package call

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"labkit/go/internal/echo"
	"labkit/go/internal/pyrandom"
)

// Summary counts every call, the unrecorded ones included, for the line on stderr; Warmup is the warm-up calls'
// own time, connecting included (part of a run's plan, not overhead: a sweep reads it back from this line).
type Summary struct {
	RecordedOK, RecordedFailed, WarmupOK, WarmupFailed, BackgroundOK, BackgroundFailed int64
	Warmup                                                                             time.Duration
}

func (s Summary) String() string {
	return fmt.Sprintf("%d recorded calls (%d failed), %d warmup (%d failed, %.6f s), %d background (%d failed)",
		s.RecordedOK+s.RecordedFailed, s.RecordedFailed, s.WarmupOK+s.WarmupFailed, s.WarmupFailed,
		s.Warmup.Seconds(), s.BackgroundOK+s.BackgroundFailed, s.BackgroundFailed)
}

// NothingMeasured says every recorded call failed: the rows say why, the exit status that nothing was measured.
func (s Summary) NothingMeasured() bool { return s.RecordedFailed > 0 && s.RecordedOK == 0 }

// counts is the Summary as it grows; the background sender adds to it from its own goroutine.
type counts struct {
	recordedOK, recordedFailed, warmupOK, warmupFailed int64
	warmup                                             time.Duration
	backgroundOK, backgroundFailed                     atomic.Int64
}

func (c *counts) count(recorded, ok bool, rtt time.Duration) {
	if !recorded {
		c.warmup += rtt
	}
	switch {
	case recorded && ok:
		c.recordedOK++
	case recorded:
		c.recordedFailed++
	case ok:
		c.warmupOK++
	default:
		c.warmupFailed++
	}
}

func (c *counts) summary() Summary {
	return Summary{c.recordedOK, c.recordedFailed, c.warmupOK, c.warmupFailed, c.backgroundOK.Load(),
		c.backgroundFailed.Load(), c.warmup}
}

// Run makes the plan's calls, writing each recorded call's row to rows as a JSON line as it ends. Cancelling
// ctx stops the run at once, also a call in flight (a signal must not wait for a silent target's deadline):
// Run then returns ctx's error with the calls counted so far; the call cut short measured nothing and has no row.
func (p *Plan) Run(ctx context.Context, rows io.Writer) (Summary, error) {
	var payloads *pyrandom.Rand // nil: unseeded, from crypto/rand
	if p.Seeded {
		payloads = pyrandom.New(p.Seed)
	}
	pool := newChannelPool(ctx, p)
	defer pool.close()
	var counted counts
	out := json.NewEncoder(rows)
	seq := 0
	var previousEnd time.Time
	for recorded, size := range p.Schedule() {
		payload := make([]byte, size)
		fillRandom(payload, payloads)
		channel, err := pool.next()
		if err != nil {
			return counted.summary(), err
		}
		// The gap runs from the end of one call to the start of the next: the connection's idle time.
		if !previousEnd.IsZero() && !sleepUntil(ctx, previousEnd.Add(p.gap)) {
			return counted.summary(), ctx.Err()
		}
		var row map[string]any
		row, previousEnd = p.timedCall(ctx, channel, recorded, seq, payload)
		if ctx.Err() != nil { // the signal cut this call short: it measured nothing
			return counted.summary(), ctx.Err()
		}
		pool.afterCall(channel, &counted)
		counted.count(recorded, row["ok"] == true, time.Duration(row["rtt_ns"].(int64)))
		if recorded {
			if err := out.Encode(row); err != nil {
				return counted.summary(), fmt.Errorf("cannot write a row: %v", err)
			}
			seq++
		}
	}
	pool.close() // before the summary: it waits for the background sender's last call
	return counted.summary(), nil
}

// sleepUntil waits until t; false when ctx was cancelled first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// timedCall makes one Echo on ch, with the TCP state around it for a recorded call when asked; its row and
// the moment it ended (the start of the next gap).
func (p *Plan) timedCall(ctx context.Context, ch *channel, recorded bool, seq int, payload []byte) (map[string]any, time.Time) {
	row := map[string]any{"seq": seq, "payload_bytes": len(payload), "cold": ch.calls == 0, "background": p.backgroundSeconds()}
	sampled := recorded && p.TCPInfo
	if sampled {
		echo.RecordTCP(row, ch.holder.Get(), "before")
	}
	outcome := echo.TimedEcho(ctx, ch.stub, payload, p.timeout)
	row["t_start_utc_ns"] = outcome.Started.UnixNano()
	ended := time.Now()
	if sampled { // before a cold call's channel closes
		echo.RecordTCP(row, ch.holder.Get(), "after")
	}
	row["rtt_ns"], row["ok"], row["grpc_code"] = outcome.RTT.Nanoseconds(), outcome.Detail == "", outcome.Code
	outcome.Server.Row(row)
	if outcome.Detail != "" {
		row["error"] = outcome.Detail
	}
	return row, ended
}

func (p *Plan) backgroundSeconds() any {
	if p.background == 0 {
		return nil
	}
	return p.background.Seconds()
}

// fillRandom fills payload with random bytes, so no layer can compress the request: with a seed,
// the bytes Python's random.Random(seed).randbytes gives the same call.
func fillRandom(payload []byte, seeded *pyrandom.Rand) {
	if seeded != nil {
		seeded.Fill(payload)
		return
	}
	_, _ = rand.Read(payload)
}
