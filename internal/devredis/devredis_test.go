package devredis

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open opens cfg and closes the instance when the test ends.
func open(t *testing.T, cfg Config) *Instance {
	t.Helper()
	inst, err := OpenWith(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := inst.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return inst
}

// checkExpiry checks that a key set with PX 200 exists at first and is gone
// no earlier than 200ms and no later than 3s after it was set.
func checkExpiry(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	if err := c.Set(ctx, "k", "v", 200*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET right after SET = %q, %v; want v, nil", got, err)
	}
	deadline := time.NewTimer(3 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := c.Exists(ctx, "k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
				t.Fatalf("key expired after %v, want >= 200ms", elapsed)
			}
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("key set with PX 200 still exists after 3s")
		case <-tick.C:
		}
	}
}

func TestMiniredis(t *testing.T) {
	t.Setenv(EnvAddr, "127.0.0.1:1") // ignored by an explicit backend
	inst := open(t, Config{Backend: Miniredis})
	if want := "embedded miniredis " + inst.Addr(); inst.String() != want {
		t.Errorf("String() = %q, want %q", inst.String(), want)
	}
	checkExpiry(t, inst.Client())
}

func TestMiniredisClose(t *testing.T) {
	inst, err := OpenWith(t.Context(), Config{Backend: Miniredis})
	if err != nil {
		t.Fatal(err)
	}
	addr := inst.Addr()
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := inst.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Fatalf("miniredis still listening on %s after Close", addr)
	}
}

func requireRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
}

func TestRedisServer(t *testing.T) {
	requireRedisServer(t)
	inst := open(t, Config{Backend: RedisServer})
	if want := "embedded redis-server " + inst.Addr(); inst.String() != want {
		t.Errorf("String() = %q, want %q", inst.String(), want)
	}
	checkExpiry(t, inst.Client())
	info, err := inst.Client().Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "redis_version:") {
		t.Fatalf("INFO server does not look like redis-server:\n%s", info)
	}
}

func TestRedisServerClose(t *testing.T) {
	requireRedisServer(t)
	inst, err := OpenWith(t.Context(), Config{Backend: RedisServer})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := inst.Client().ConfigGet(t.Context(), "dir").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.Dial("tcp", inst.Addr()); err == nil {
		conn.Close()
		t.Fatalf("redis-server still listening on %s after Close", inst.Addr())
	}
	if _, err := os.Stat(dir["dir"]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary directory %q not removed: Stat error = %v", dir["dir"], err)
	}
}

func TestRedisServerNotOnPath(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := OpenWith(t.Context(), Config{Backend: RedisServer})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Fatalf("err = %v, want one explaining how to install redis-server", err)
	}
}

func TestAutoPrefersRedisAddr(t *testing.T) {
	target := open(t, Config{Backend: Miniredis})
	t.Setenv(EnvAddr, target.Addr())
	inst := open(t, Config{})
	if want := "REDIS_ADDR=" + target.Addr(); inst.String() != want {
		t.Errorf("String() = %q, want %q", inst.String(), want)
	}
	if err := inst.Client().Set(t.Context(), "via-env", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := target.Client().Get(t.Context(), "via-env").Err(); err != nil {
		t.Fatalf("key written through REDIS_ADDR not found on the target: %v", err)
	}
	// Closing an instance opened from REDIS_ADDR leaves the server running.
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := target.Client().Ping(t.Context()).Err(); err != nil {
		t.Fatalf("target stopped by closing the REDIS_ADDR instance: %v", err)
	}
}

func TestRedisAddrURL(t *testing.T) {
	target := open(t, Config{Backend: Miniredis})
	t.Setenv(EnvAddr, "redis://user:secret@"+target.Addr()+"/0")
	// miniredis has no users, so AUTH fails; the error must not leak the
	// password.
	_, err := Open(t.Context())
	if err == nil {
		t.Fatal("Open succeeded with bad credentials")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestRedisAddrUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv(EnvAddr, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := Open(ctx); err == nil || !strings.Contains(err.Error(), "REDIS_ADDR="+addr) {
		t.Fatalf("Open with unreachable REDIS_ADDR: err = %v, want an error naming it", err)
	}
}

func TestAutoWithoutRedisServer(t *testing.T) {
	t.Setenv(EnvAddr, "")
	t.Setenv("PATH", t.TempDir())
	inst := open(t, Config{})
	if !strings.HasPrefix(inst.String(), "embedded miniredis ") {
		t.Fatalf("String() = %q, want the miniredis backend", inst.String())
	}
}

func TestAutoWithRedisServer(t *testing.T) {
	requireRedisServer(t)
	t.Setenv(EnvAddr, "")
	inst := open(t, Config{})
	if !strings.HasPrefix(inst.String(), "embedded redis-server ") {
		t.Fatalf("String() = %q, want the redis-server backend", inst.String())
	}
}

func TestUnknownBackend(t *testing.T) {
	if _, err := OpenWith(t.Context(), Config{Backend: 42}); err == nil || !strings.Contains(err.Error(), "Backend(42)") {
		t.Fatalf("err = %v, want an unknown-backend error", err)
	}
}

func TestOpenEmbeddedIgnoresRedisAddr(t *testing.T) {
	target := open(t, Config{Backend: Miniredis})
	t.Setenv(EnvAddr, target.Addr())
	var insts []*Instance
	for range 2 {
		inst, err := OpenEmbedded(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inst.Close() })
		if !strings.HasPrefix(inst.String(), "embedded ") {
			t.Fatalf("String() = %q, want an embedded server", inst.String())
		}
		insts = append(insts, inst)
	}
	if insts[0].Addr() == insts[1].Addr() || insts[0].Addr() == target.Addr() {
		t.Fatalf("addresses %s, %s (REDIS_ADDR %s): want two new independent servers",
			insts[0].Addr(), insts[1].Addr(), target.Addr())
	}
	checkExpiry(t, insts[1].Client())
}
