// Package serverproc holds what both the integration tests' harness (integration/redistest) and the
// examples' embedded Redis (internal/devredis) need to run redis-server as a child process: a free
// loopback port to give it, a probe of whether it answers yet, and the tail of its output for the
// error that says why it did not start.
package serverproc

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another process may take it
// before the caller's server binds it: a caller retries on "Address already in use".
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// Ping reports whether a Redis server at addr answers PING with PONG, waiting at most a second for
// the connection and a second for the answer.
func Ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// Output is an io.Writer, safe for concurrent use, that keeps the last bytes written to it: a child
// process's stdout and stderr, kept for the error that reports its failure. The zero value keeps
// nothing; use NewOutput.
type Output struct {
	limit int

	mu  sync.Mutex
	buf []byte
}

// NewOutput returns an Output that keeps the last limit bytes written to it.
func NewOutput(limit int) *Output { return &Output{limit: limit} }

// Write implements io.Writer. It never fails.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	if over := len(o.buf) - o.limit; over > 0 {
		o.buf = append(o.buf[:0], o.buf[over:]...)
	}
	return len(p), nil
}

// String returns the bytes kept.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

// Tail formats the last max bytes kept (marked "..." when there were more), trailing newlines
// dropped, to be appended to an error message: on a line of their own under a header, or
// "; it printed nothing".
func (o *Output) Tail(max int) string {
	s := o.String()
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "; it printed nothing"
	}
	return "\n--- redis-server output (tail) ---\n" + s
}
