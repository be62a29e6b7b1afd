package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// noRetryClient returns a client that fails fast: no command retries, a
// single dial attempt and a 200ms read timeout.
func noRetryClient(t *testing.T, s *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:          s.Addr(),
		ReadTimeout:   200 * time.Millisecond,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fatalTB is a testing.TB whose Fatalf records the message and ends the
// calling goroutine instead of failing the test.
type fatalTB struct {
	*testing.T
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalMessage runs fn with a fatalTB in its own goroutine and returns the
// message fn passed to Fatalf, or "" if it returned normally.
func fatalMessage(t *testing.T, fn func(tb testing.TB)) string {
	tb := &fatalTB{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb.msg
}

func TestStartPing(t *testing.T) {
	s := redistest.Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.Port() == 0 {
		t.Fatalf("Addr() = %q, Port() = %d; want a loopback address with a non-zero port", s.Addr(), s.Port())
	}
	c := s.Client(t)
	if got, err := c.Ping(t.Context()).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v; want PONG, nil", got, err)
	}
}

func TestWithArgs(t *testing.T) {
	s := redistest.Start(t, redistest.WithArgs("--maxmemory", "12mb"))
	got, err := s.Client(t).ConfigGet(t.Context(), "maxmemory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["maxmemory"] != "12582912" {
		t.Fatalf("maxmemory = %q, want 12582912", got["maxmemory"])
	}
}

func TestKillRestart(t *testing.T) {
	ctx := t.Context()
	s := redistest.Start(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	port := s.Port()

	s.Kill()
	if err := noRetryClient(t, s).Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded against a killed server")
	}
	s.Kill() // killing a dead server is a no-op

	s.Restart(t)
	if s.Port() != port {
		t.Fatalf("port changed across restart: %d -> %d", port, s.Port())
	}
	// The client reconnects; the data is gone because nothing was persisted.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart: err = %v, want redis.Nil", err)
	}
}

func TestStopRestart(t *testing.T) {
	ctx := t.Context()
	s := redistest.Start(t)
	c := s.Client(t)
	s.Stop()
	if err := noRetryClient(t, s).Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded against a stopped server")
	}
	s.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	ctx := t.Context()
	s := redistest.Start(t)
	c := noRetryClient(t, s)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	s.Pause()
	err := c.Ping(ctx).Err()
	var netErr interface{ Timeout() bool }
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING while paused: err = %v, want a timeout", err)
	}

	s.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}
}

func TestStopWhilePaused(t *testing.T) {
	s := redistest.Start(t)
	s.Pause()
	s.Stop() // must not hang: Stop resumes the process so SIGTERM is handled
	s.Restart(t)
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCleanupWhilePaused(t *testing.T) {
	var addr string
	t.Run("paused", func(t *testing.T) {
		s := redistest.Start(t)
		addr = s.Addr()
		s.Pause() // left paused: the cleanup must still terminate it
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("server still answering after its test's cleanup")
	}
}

func TestStartNotOnPath(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	msg := fatalMessage(t, func(tb testing.TB) { redistest.Start(tb) })
	want := "redis-server not found on PATH: install it with `apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis`"
	if !strings.Contains(msg, want) {
		t.Fatalf("Fatalf message = %q, want it to contain %q", msg, want)
	}
}

func TestStartFailureShowsOutput(t *testing.T) {
	msg := fatalMessage(t, func(tb testing.TB) {
		redistest.Start(tb, redistest.WithArgs("--no-such-directive", "x"))
	})
	if !strings.Contains(msg, "exited before answering PING") || !strings.Contains(msg, "no-such-directive") {
		t.Fatalf("Fatalf message does not quote the server's output:\n%s", msg)
	}
	t.Logf("Fatalf message:\n%s", msg)
}

func TestMisuse(t *testing.T) {
	s := redistest.Start(t)
	if msg := fatalMessage(t, func(tb testing.TB) { s.Restart(tb) }); !strings.Contains(msg, "still running") {
		t.Errorf("Restart while running: Fatalf message = %q, want it to mention \"still running\"", msg)
	}
	s.Kill()
	s.Resume() // no-op
	s.Stop()   // no-op
	s.Restart(t)
	s.Pause()
	s.Pause() // no-op
	s.Kill()  // kills a paused server
	s.Restart(t)
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestRestartRetriesBusyPort(t *testing.T) {
	s := redistest.Start(t)
	s.Kill()
	// Hold the port briefly, so that the first attempt to rebind it fails.
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(150*time.Millisecond, func() { l.Close() })
	defer release.Stop()
	s.Restart(t)
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}
