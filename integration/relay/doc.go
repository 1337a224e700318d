// Package relay is a counting TCP relay placed between an ssh client and
// sshd. The benchmark and the end-to-end tests point Ansible at a relay
// instead of at sshd, so they can see what actually crosses the wire and
// can add network latency to a loopback lab.
//
// # Usage
//
//	r, err := relay.Start(ctx, "127.0.0.1:0", "127.0.0.1:2222", 10*time.Millisecond)
//	if err != nil { ... }
//	defer r.Close()
//	// connect the client to r.Addr() (or r.Port() on 127.0.0.1)
//	st := r.Stats()
//
// A Relay is safe for concurrent use. Start returns once the listener is
// bound; every accepted connection is relayed to a fresh connection to the
// target. The relay ends when Close is called or when the context passed to
// Start ends, whichever comes first; Close waits for all of its goroutines.
//
// # Counters
//
// [Stats] is a snapshot of counters kept since Start or the last
// [Relay.Reset]:
//
//   - Connections: client connections accepted, counted at accept time
//     (before the target is dialed, so a failed dial still counts).
//   - BytesUp, BytesDown: payload bytes delivered client→server and
//     server→client. TCP/IP headers are not counted.
//   - Turns: request/response turns, summed over all connections. Each
//     connection remembers the direction of the last chunk it read; a turn
//     is counted each time a server→client chunk follows a client→server
//     chunk on the same connection. A server that speaks first (the SSH
//     banner) is not a turn, and neither is a client→server change. This is
//     a round trip as seen on the wire: a client that waits for each answer
//     before sending again makes one turn per exchange, while pipelined or
//     overlapping traffic makes fewer. Directions are observed when the
//     relay reads a chunk, so when both peers send at once the count
//     depends on read order; treat it as a close estimate, not an exact
//     protocol count.
//
// # Latency
//
// The latency given to Start is one-way delay added in each direction, so
// the round-trip time seen by a client grows by twice that value. It does
// not reduce throughput: each chunk is timestamped when the relay reads it
// and is queued for delivery at that time plus the latency, so many chunks
// can be in flight at once, like on a long link, rather than sleeping once
// per chunk. The queue is bounded (see queueChunks); when it is full the
// relay stops reading from that side, which is TCP back-pressure. With no
// latency there is no queue: each chunk is written as soon as it is read,
// so the relay adds as little as it can to what it measures. For the same
// reason it acknowledges what it reads at once (TCP_QUICKACK): see ackNow.
//
// # Half-close
//
// When one side closes its sending half (read EOF), the relay delivers what
// is still queued and then half-closes the other connection's sending half,
// so protocols that signal end of input with EOF work through the relay. A
// connection pair is torn down when both directions have ended, or at once
// on a read or write error.
//
// # Stall
//
// [Relay.Stall] makes the network a blackhole and back: while stalled, the
// relay accepts connections and reads what each side sends but delivers
// nothing, in either direction, so an ssh client sees neither the banner
// of a new connection nor any answer on an open one (ConnectTimeout and
// ServerAliveInterval fire as on a dead link). Held data is delivered when
// the stall ends.
package relay
