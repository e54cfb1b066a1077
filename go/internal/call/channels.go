package call

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"labkit/go/echopb"
	"labkit/go/internal/echo"
)

// channel is one grpc-go ClientConn with its own TCP connection, whose socket the dialer keeps for TCP_INFO.
type channel struct {
	conn   *grpc.ClientConn
	stub   echopb.EchoServiceClient
	holder *echo.ConnHolder
	calls  int
}

// channelPool spreads calls over pool=N channels round robin; with cold calls every call gets a new one.
type channelPool struct {
	ctx        context.Context // the run's: cancelling it ends the background sender's call in flight too
	plan       *Plan
	size       int
	channels   []*channel
	turn       int
	background *backgroundSender
}

func newChannelPool(ctx context.Context, p *Plan) *channelPool {
	return &channelPool{ctx: ctx, plan: p, size: p.options.Pool()}
}

func (pool *channelPool) open() (*channel, error) {
	holder := &echo.ConnHolder{}
	dialer := func(ctx context.Context, address string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", address)
		if err == nil {
			holder.Set(conn)
		}
		return conn, err
	}
	conn, err := grpc.NewClient(pool.plan.Target, append(pool.plan.dial, grpc.WithContextDialer(dialer))...)
	if err != nil {
		return nil, fmt.Errorf("cannot use target %s: %v", pool.plan.Target, err)
	}
	return &channel{conn: conn, stub: echopb.NewEchoServiceClient(conn), holder: holder}, nil
}

// next is the channel of the next call, opening it on first use.
func (pool *channelPool) next() (*channel, error) {
	if len(pool.channels) < pool.size {
		ch, err := pool.open()
		if err != nil {
			return nil, err
		}
		pool.channels = append(pool.channels, ch)
		pool.turn = len(pool.channels) - 1
		return ch, nil
	}
	pool.turn = (pool.turn + 1) % len(pool.channels)
	return pool.channels[pool.turn], nil
}

// afterCall closes a cold call's channel, and starts the background sender after the first call.
func (pool *channelPool) afterCall(ch *channel, counted *counts) {
	ch.calls++
	if pool.plan.Cold {
		ch.conn.Close()
		pool.channels = pool.channels[:0]
		return
	}
	if pool.plan.background > 0 && pool.background == nil {
		// Only now, so that the first call alone opened the connection.
		pool.background = startBackground(pool.ctx, ch.stub, pool.plan.background, pool.plan.timeout, counted)
	}
}

func (pool *channelPool) close() {
	if pool.background != nil {
		pool.background.stop()
		pool.background = nil
	}
	for _, ch := range pool.channels {
		ch.conn.Close()
	}
	pool.channels = nil
}

// backgroundSender sends a 1-byte Echo every interval on a fixed schedule, as Python's BackgroundSender.
type backgroundSender struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func startBackground(ctx context.Context, stub echopb.EchoServiceClient, interval, timeout time.Duration, counted *counts) *backgroundSender {
	b := &backgroundSender{done: make(chan struct{})}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-ticker.C:
				if echo.TimedEcho(ctx, stub, []byte{0}, timeout).Detail == "" {
					counted.backgroundOK.Add(1)
				} else {
					counted.backgroundFailed.Add(1)
				}
			}
		}
	}()
	return b
}

func (b *backgroundSender) stop() { close(b.done); b.wg.Wait() }
