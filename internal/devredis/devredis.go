// Package devredis provides the zero-setup Redis used by the runnable
// examples.
//
// [Open] returns a connected client to the first of these that applies:
//
//  1. the server named by the REDIS_ADDR environment variable;
//  2. a redis-server child process on a free loopback port, if redis-server
//     is on PATH;
//  3. an in-process miniredis server (github.com/alicebob/miniredis/v2).
//
// The embedded servers persist nothing and are torn down by
// [Instance.Close]. miniredis is a partial reimplementation of Redis, good
// enough for demonstrations; install redis-server, or point REDIS_ADDR at a
// real server, for anything more.
package devredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/internal/serverproc"
)

// EnvAddr is the environment variable [Open] consults first. Its value is
// either a host:port address or a redis:// or rediss:// URL as accepted by
// [redis.ParseURL].
const EnvAddr = "REDIS_ADDR"

const (
	// readyTimeout bounds how long to wait for a spawned redis-server to
	// answer PING.
	readyTimeout = 10 * time.Second
	// readyPoll is the interval between PING probes while waiting.
	readyPoll = 10 * time.Millisecond
	// startAttempts is how many ports to try when redis-server cannot bind.
	startAttempts = 5
	// outputLimit is how many trailing bytes of redis-server output are
	// kept for error messages.
	outputLimit = 4 << 10
)

// A Backend selects where [OpenWith] gets its Redis from.
type Backend int

const (
	// Auto uses the REDIS_ADDR environment variable if it is set and
	// non-empty, otherwise a redis-server child process if redis-server is
	// on PATH, otherwise miniredis. It is the zero Backend, and what [Open]
	// uses.
	Auto Backend = iota
	// RedisServer starts a redis-server child process, ignoring REDIS_ADDR.
	// It fails if redis-server is not on PATH.
	RedisServer
	// Miniredis starts an in-process miniredis server, ignoring REDIS_ADDR.
	Miniredis
)

// String returns the name of the backend: "auto", "redis-server",
// "miniredis", or "Backend(n)" for an unknown value.
func (b Backend) String() string {
	switch b {
	case Auto:
		return "auto"
	case RedisServer:
		return "redis-server"
	case Miniredis:
		return "miniredis"
	}
	return "Backend(" + strconv.Itoa(int(b)) + ")"
}

// Config configures [OpenWith]. The zero Config is what [Open] uses.
type Config struct {
	// Backend selects the Redis to use; the zero value is Auto.
	Backend Backend
}

// An Instance is a Redis opened by [Open] or [OpenWith], with a client
// connected to it. Its methods are safe for concurrent use.
type Instance struct {
	client   redis.UniversalClient
	addr     string
	describe string
	teardown func() error // stops the embedded server; nil for REDIS_ADDR

	closeOnce sync.Once
	closeErr  error
}

// Open is OpenWith with the zero Config: it connects to REDIS_ADDR if set,
// else starts redis-server if it is on PATH, else starts miniredis.
// The caller must call [Instance.Close] when done.
func Open(ctx context.Context) (*Instance, error) {
	return OpenWith(ctx, Config{})
}

// OpenEmbedded starts a new embedded Redis whatever REDIS_ADDR says: redis-server if it is on PATH,
// else miniredis. Programs that need several independent servers (a RedLock over 5 masters) call it
// once per server. The caller must call [Instance.Close] when done.
func OpenEmbedded(ctx context.Context) (*Instance, error) {
	if bin, err := exec.LookPath("redis-server"); err == nil {
		return openRedisServer(ctx, bin)
	}
	return openMiniredis(ctx)
}

// OpenWith opens the Redis selected by cfg.Backend, connects a client to
// it, and checks that it answers PING.
//
// ctx bounds only the opening: connecting to REDIS_ADDR, or waiting (at
// most 10 seconds) for a spawned redis-server to answer. Cancelling it later
// does not affect the returned Instance.
//
// OpenWith returns an error, and leaves nothing running, if the server at
// REDIS_ADDR does not answer PING, if RedisServer is requested but
// redis-server is not on PATH, or if the chosen server fails to start. In
// particular, Auto does not fall back to miniredis when redis-server is on
// PATH but fails to start.
//
// A spawned redis-server listens on 127.0.0.1 only, with persistence
// disabled and a fresh temporary directory as its working directory. On
// Linux it is killed by the kernel if the calling process dies without
// calling Close.
//
// The miniredis backend expires keys against the wall clock, as Redis
// does: a key set with PX 200 is gone 200ms later, although miniredis
// otherwise only expires keys when told to.
func OpenWith(ctx context.Context, cfg Config) (*Instance, error) {
	switch cfg.Backend {
	case Auto:
		if v := os.Getenv(EnvAddr); v != "" {
			return openAddr(ctx, v)
		}
		if bin, err := exec.LookPath("redis-server"); err == nil {
			return openRedisServer(ctx, bin)
		}
		return openMiniredis(ctx)
	case RedisServer:
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, fmt.Errorf("devredis: redis-server not found on PATH: install it with `apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis`: %w", err)
		}
		return openRedisServer(ctx, bin)
	case Miniredis:
		return openMiniredis(ctx)
	}
	return nil, fmt.Errorf("devredis: unknown backend %v", cfg.Backend)
}

// Client returns the client connected to the instance. It is closed by
// [Instance.Close].
func (i *Instance) Client() redis.UniversalClient { return i.client }

// Addr returns the host:port address of the server.
func (i *Instance) Addr() string { return i.addr }

// String describes the instance for humans, for example
// "embedded redis-server 127.0.0.1:40123", "embedded miniredis
// 127.0.0.1:40123" or "REDIS_ADDR=localhost:6379". Passwords in a
// REDIS_ADDR URL are redacted.
func (i *Instance) String() string { return i.describe }

// Close closes the client and, for an embedded server, stops it: a
// redis-server child is killed and waited for and its temporary directory
// removed; miniredis is shut down. A server named by REDIS_ADDR is left
// running. Close is idempotent: later calls return the first call's result.
func (i *Instance) Close() error {
	i.closeOnce.Do(func() {
		err := i.client.Close()
		if i.teardown != nil {
			err = errors.Join(err, i.teardown())
		}
		i.closeErr = err
	})
	return i.closeErr
}

// openAddr connects to the server named by the REDIS_ADDR value v.
func openAddr(ctx context.Context, v string) (*Instance, error) {
	opts := &redis.Options{Addr: v}
	shown := v
	if strings.Contains(v, "://") {
		var err error
		if opts, err = redis.ParseURL(v); err != nil {
			return nil, fmt.Errorf("devredis: %s: %w", EnvAddr, err)
		}
		if u, err := url.Parse(v); err == nil {
			shown = u.Redacted()
		}
	}
	describe := EnvAddr + "=" + shown
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("devredis: %s: PING failed: %w", describe, err)
	}
	return &Instance{client: client, addr: opts.Addr, describe: describe}, nil
}

// openMiniredis starts miniredis on a free loopback port.
func openMiniredis(ctx context.Context) (*Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("devredis: starting miniredis: %w", err)
	}
	m := miniredis.NewMiniRedis()
	// By default miniredis TTLs only move on FastForward. With ClockTTL,
	// every command first advances all TTLs by the wall-clock time elapsed
	// since the previous one, so keys expire on time with no background
	// goroutine, and TTL, PTTL and (P)EXPIREAT agree with real time. SetTime
	// is deliberately not called: it would freeze miniredis's clock.
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("devredis: starting miniredis: %w", err)
	}
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		m.Close()
		return nil, fmt.Errorf("devredis: miniredis on %s: PING failed: %w", m.Addr(), err)
	}
	return &Instance{
		client:   client,
		addr:     m.Addr(),
		describe: "embedded miniredis " + m.Addr(),
		teardown: func() error { m.Close(); return nil },
	}, nil
}

// openRedisServer starts the redis-server binary bin on a free loopback
// port, retrying with another port if the chosen one is taken before
// redis-server can bind it.
func openRedisServer(ctx context.Context, bin string) (*Instance, error) {
	dir, err := os.MkdirTemp("", "devredis-")
	if err != nil {
		return nil, fmt.Errorf("devredis: %w", err)
	}
	for attempt := 1; ; attempt++ {
		inst, err := spawn(ctx, bin, dir)
		if err == nil {
			return inst, nil
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts {
			continue
		}
		return nil, errors.Join(fmt.Errorf("devredis: %w", err), os.RemoveAll(dir))
	}
}

var errAddrInUse = errors.New("address already in use")

// spawn makes one attempt at starting redis-server in dir. On failure the
// process has exited, and the error wraps errAddrInUse if it could not bind
// its port.
func spawn(ctx context.Context, bin, dir string) (*Instance, error) {
	port, err := serverproc.FreePort()
	if err != nil {
		return nil, fmt.Errorf("picking a free port: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	out := serverproc.NewOutput(outputLimit)
	// Not CommandContext: the server must outlive ctx.
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
	)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	kill := func() {
		_ = cmd.Process.Kill()
		<-done
	}

	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for !serverproc.Ping(addr) {
		select {
		case <-done:
			err := fmt.Errorf("redis-server on %s exited before answering PING (%v)%s", addr, waitErr, out.Tail(outputLimit))
			if strings.Contains(out.String(), "Address already in use") {
				err = fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return nil, err
		case <-ctx.Done():
			kill()
			return nil, fmt.Errorf("waiting for redis-server on %s: %w", addr, ctx.Err())
		case <-deadline.C:
			kill()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within %v%s", addr, readyTimeout, out.Tail(outputLimit))
		case <-tick.C:
		}
	}

	return &Instance{
		client:   redis.NewClient(&redis.Options{Addr: addr}),
		addr:     addr,
		describe: "embedded redis-server " + addr,
		teardown: func() error {
			kill()
			return os.RemoveAll(dir)
		},
	}, nil
}
