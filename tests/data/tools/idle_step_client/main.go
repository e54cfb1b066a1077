// A stand-in for the Go client of the idle-connection report (grpc-go
// #5599/#8436), written for labkit's parser tests. The reporter's own client
// is not available here; this one prints the two line shapes quoted in the
// research brief ("Payload size: N bytes", then one "Round trip time: <Go
// duration>" per call), so the parser is tested on real Go output, with the
// units Go really picks (µs on loopback, ms, s).
//
// It calls echo.EchoService/Echo without generated code: on the wire
// EchoRequest{bytes payload = 1} is a BytesValue and EchoResponse{int64
// payload_length = 1} an Int64Value.
//
// Run: go run . -addr 127.0.0.1:5312 -sizes 1000,14000,16000 -n 3 -sleep 200ms
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5312", "echo server")
	sizes := flag.String("sizes", "1000,14000,16000", "request sizes in bytes")
	n := flag.Int("n", 3, "calls per size")
	sleep := flag.Duration("sleep", 200*time.Millisecond, "pause between calls")
	flag.Parse()

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for _, field := range strings.Split(*sizes, ",") {
		size, err := strconv.Atoi(field)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("Payload size: %d bytes\n", size)
		req := &wrapperspb.BytesValue{Value: make([]byte, size)}
		for i := 0; i < *n; i++ {
			resp := &wrapperspb.Int64Value{}
			start := time.Now()
			err := conn.Invoke(context.Background(), "/echo.EchoService/Echo", req, resp)
			elapsed := time.Since(start)
			if err != nil {
				log.Fatal(err)
			}
			if resp.Value != int64(size) {
				log.Fatalf("server saw %d bytes, sent %d", resp.Value, size)
			}
			fmt.Printf("Round trip time: %v\n", elapsed)
			time.Sleep(*sleep)
		}
	}
}
