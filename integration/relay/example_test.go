package relay_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/ansible-bridge/ansible-bridge/integration/relay"
)

// A relay in front of an echo server, with 5 ms added each way.
func ExampleStart() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()

	r, err := relay.Start(context.Background(), "127.0.0.1:0", ln.Addr().String(), 5*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		log.Fatal(err)
	}
	for _, msg := range []string{"ping", "pong!"} {
		c.Write([]byte(msg))
		io.ReadFull(c, make([]byte, len(msg)))
	}
	c.Close()
	r.Close() // waits for the relay's goroutines, so the counters are final
	fmt.Printf("%+v\n", r.Stats())
	// Output: {Connections:1 BytesUp:9 BytesDown:9 Turns:2}
}
