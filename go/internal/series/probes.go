package series

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"labkit/go/internal/echo"
	"labkit/go/internal/reason"
)

// pingLoop runs one `ping -c 1` per tick (iputils' -i is a minimum, not a period) and reports its raw output.
// Cancelling ctx kills the runs still waiting for a reply.
func (a *Agent) pingLoop(ctx context.Context) {
	argv := []string{"ping", "-D", "-n", "-c", "1", "-W", strconv.Itoa(int(math.Max(1, math.Ceil(a.timeout.Seconds())))), a.Address}
	var wg sync.WaitGroup
	defer wg.Wait()
	for index := 0; index < a.Ticks; index++ {
		if !wait(ctx, a.due(index, "ping")) {
			return
		}
		tick, started := a.FirstTick+index, time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), "LC_ALL=C") // "time=0,045" in some locales
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			status := 0
			if err := cmd.Run(); err != nil {
				status = 127
				if exit, ok := err.(*exec.ExitError); ok {
					status = exit.ExitCode()
				} else {
					stderr.WriteString("cannot run ping: " + err.Error())
				}
			}
			a.out.emit(map[string]any{"event": "ping", "tick": tick, "t_utc_ns": started.UnixNano(), "argv": argv,
				"status": status, "stdout": stdout.String(), "stderr": stderr.String()})
		}()
	}
}

// tcpEchoClient times the raw TCP echo on one open connection; a lost one is re-opened outside the window.
type tcpEchoClient struct {
	target  string
	timeout time.Duration
	conn    net.Conn
}

func (c *tcpEchoClient) call(payload []byte) result {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.target, c.timeout)
		if err != nil {
			return failed(fmt.Sprintf("connect to %s: %v", c.target, reason.Of(err)), false)
		}
		conn.(*net.TCPConn).SetNoDelay(true)
		c.conn = conn
	}
	request := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(request, uint32(len(payload)))
	copy(request[4:], payload)
	reply := make([]byte, echo.TCPEchoReplyBytes)
	_ = c.conn.SetDeadline(time.Now().Add(c.timeout))
	started := time.Now()
	_, err := c.conn.Write(request)
	if err == nil {
		_, err = io.ReadFull(c.conn, reply)
	}
	rtt := time.Since(started)
	if err != nil {
		c.close()
		return failed(reason.Of(err).Error(), false)
	}
	if n := binary.BigEndian.Uint32(reply); int(n) != len(payload) {
		c.close() // as Python's TcpEchoClient: a connection out of step is not reused, the call has no time
		return failed(fmt.Sprintf("server reported %d bytes, sent %d", n, len(payload)), false)
	}
	stamps := echo.NoStamps
	stamps.RecvUTC, stamps.SendUTC = int64(binary.BigEndian.Uint64(reply[4:])), int64(binary.BigEndian.Uint64(reply[12:]))
	return result{rtt, true, "", false, started, stamps}
}

func (c *tcpEchoClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}
