package echo

import (
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// TCP state columns, named and valued as labkit/echo/tcpinfo.py records them from `ss -tin`: each
// sampled field as <column>_before and <column>_after, mss and tcp_cc once per row. ss leaves a
// field out when the kernel's value means "none" (ssthresh at infinity, no retransmission, nothing
// acked or sent yet); those are null here too, so rows of both implementations read the same.
var sampledColumns = []string{"cwnd", "ssthresh", "rto_ms", "srtt_ms", "bytes_acked", "retrans", "lastsnd_ms"}

// TCPColumns are every column a row gets from TCP state, in the order Python's TCP_COLUMNS lists them.
func TCPColumns() []string {
	var columns []string
	for _, column := range sampledColumns {
		columns = append(columns, column+"_before", column+"_after")
	}
	return append(columns, "mss", "tcp_cc")
}

// TCPState is one getsockopt(TCP_INFO) reading of a connection, as ss would print it.
func TCPState(conn net.Conn) map[string]any {
	tcp, isTCP := conn.(*net.TCPConn)
	if !isTCP {
		return nil
	}
	rawConn, err := tcp.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	var cc string
	_ = rawConn.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		cc, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	if err != nil || info == nil {
		return nil
	}
	state := map[string]any{"tcp_cc": cc}
	// Each field only when ss prints it (see tcp_show_info in iproute2's ss.c).
	if info.Snd_cwnd > 0 {
		state["cwnd"] = info.Snd_cwnd
	}
	if info.Rto > 0 && info.Rto != 3000000 { // 3 s is the kernel's initial RTO, which ss leaves out
		state["rto_ms"] = float64(info.Rto) / 1000
	}
	if info.Rtt > 0 {
		state["srtt_ms"] = float64(info.Rtt) / 1000
	}
	if info.Snd_mss > 0 {
		state["mss"] = info.Snd_mss
	}
	if info.Snd_ssthresh < 0xFFFF {
		state["ssthresh"] = info.Snd_ssthresh
	}
	if info.Bytes_acked > 0 {
		state["bytes_acked"] = info.Bytes_acked
	}
	if info.Retrans > 0 || info.Total_retrans > 0 {
		state["retrans"] = info.Total_retrans
	}
	if info.Last_data_sent > 0 {
		state["lastsnd_ms"] = info.Last_data_sent
	}
	return state
}

// RecordTCP adds the TCP state of conn to row as <column>_<when>; mss and tcp_cc once. A nil
// conn (a cold call before its connection exists) leaves the columns null.
func RecordTCP(row map[string]any, conn net.Conn, when string) {
	var state map[string]any
	if conn != nil {
		state = TCPState(conn)
	}
	for _, column := range sampledColumns {
		row[column+"_"+when] = state[column]
	}
	for _, column := range []string{"mss", "tcp_cc"} {
		if row[column] == nil {
			row[column] = state[column] // every row has the column, null until a reading has it
		}
	}
}

// ConnHolder keeps the last connection a dialer opened, for TCP_INFO on a call's own connection.
type ConnHolder struct {
	mu   sync.Mutex
	conn net.Conn
}

// Set records conn as the current connection.
func (h *ConnHolder) Set(conn net.Conn) { h.mu.Lock(); h.conn = conn; h.mu.Unlock() }

// Get is the current connection, or nil.
func (h *ConnHolder) Get() net.Conn { h.mu.Lock(); defer h.mu.Unlock(); return h.conn }
