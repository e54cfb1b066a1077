package hop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"labkit/go/internal/limits"
)

// runLoad runs a load to its end and returns its summary and its rows (the CSV's header checked).
func runLoad(t *testing.T, c LoadConfig) (LoadSummary, [][]string) {
	t.Helper()
	load, err := NewLoad(c)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	summary, err := load.Run(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(records[0], ",") != strings.Join(LoadColumns, ",") {
		t.Fatalf("header %v", records[0])
	}
	return summary, records[1:]
}

// Every request is a row: each of the connections sent some, every answer is the back's body, and each
// connection's latencies add up to no more than the load lasted (one request in flight per connection).
func TestTheLoadTimesEveryRequestOnEachOfItsConnections(t *testing.T) {
	_, httpPort, _ := startBack(t, DefaultBody())
	digest := sha256.Sum256(DefaultBody())
	summary, rows := runLoad(t, LoadConfig{URL: fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, BodyPath), Connections: 3,
		Duration: "300ms", Timeout: "5s", BodySHA256: hex.EncodeToString(digest[:])})
	if len(rows) != summary.Requests || summary.OK != summary.Requests || summary.Requests < 3 {
		t.Fatalf("summary %v, %d rows", summary, len(rows))
	}
	busy := map[string]int64{}
	for _, row := range rows {
		if row[2] != "200" || row[4] != strconv.Itoa(len(DefaultBody())) || row[5] != "" {
			t.Fatalf("row %v", row)
		}
		latency, _ := strconv.ParseInt(row[3], 10, 64)
		busy[row[1]] += latency
	}
	if len(busy) != 3 {
		t.Fatalf("requests on connections %v, not 0, 1 and 2", busy)
	}
	for connection, total := range busy {
		if total > summary.Elapsed.Nanoseconds() {
			t.Fatalf("connection %s was busy %d ns in a load of %v", connection, total, summary.Elapsed)
		}
	}
}

// A body other than the one asked for, an HTTP error and no server at all are rows with their error.
func TestTheLoadRecordsWrongBodiesStatusesAndRefusalsAsErrors(t *testing.T) {
	_, httpPort, _ := startBack(t, DefaultBody())
	cases := map[string]struct{ url, sha, want string }{
		"wrong body": {fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, BodyPath), strings.Repeat("0", 64), "a body other than the back's"},
		"404":        {fmt.Sprintf("http://127.0.0.1:%d/nothing", httpPort), "", "HTTP 404"},
		"refused":    {"http://127.0.0.1:1/products", "", "connection refused"},
	}
	for name, c := range cases {
		summary, rows := runLoad(t, LoadConfig{URL: c.url, Connections: 1, Duration: "50ms", Timeout: "1s", BodySHA256: c.sha})
		if summary.OK != 0 || len(rows) == 0 || !strings.Contains(rows[0][5], c.want) {
			t.Fatalf("%s: summary %v, first row %v", name, summary, rows[0])
		}
	}
}

// A cancelled load stops at once and says so.
func TestACancelledLoadReturnsContextCanceled(t *testing.T) {
	_, httpPort, _ := startBack(t, DefaultBody())
	load, err := NewLoad(LoadConfig{URL: fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, BodyPath), Connections: 2,
		Duration: "168h", Timeout: "5s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	if _, err := load.Run(ctx, &out); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("err %v", err)
	}
}

func TestTheLoadRefusesBadInputBeforeItConnects(t *testing.T) {
	for _, c := range []LoadConfig{
		{URL: "ftp://x/", Connections: 1, Duration: "1s", Timeout: "1s"},
		{URL: "http://127.0.0.1:1/", Connections: limits.MaxConcurrency + 1, Duration: "1s", Timeout: "1s"},
		{URL: "http://127.0.0.1:1/", Connections: 0, Duration: "1s", Timeout: "1s"},
		{URL: "http://127.0.0.1:1/", Connections: 1, Duration: "169h", Timeout: "1s"},
		{URL: "http://127.0.0.1:1/", Connections: 1, Duration: "0s", Timeout: "1s"},
		{URL: "http://127.0.0.1:1/", Connections: 1, Duration: "1s", Timeout: "1s", BodySHA256: "abc"},
	} {
		if _, err := NewLoad(c); err == nil {
			t.Fatalf("%+v was accepted", c)
		}
	}
}
