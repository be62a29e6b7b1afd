package bench

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// baselineLease is the lease of the baseline's SET NX PX.
const baselineLease = 30000 // ms

// unlockScript is the classic compare-and-delete release of redislock.
var unlockScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// errBaselineNotHeld is returned by baselineRelease when the token no longer owns the key.
var errBaselineNotHeld = errors.New("baseline: lock not held")

// baselineAcquire runs SET key token NX PX 30000 and reports whether it took the lock.
func baselineAcquire(ctx context.Context, c *redis.Client, key, token string) (bool, error) {
	err := c.Do(ctx, "set", key, token, "nx", "px", baselineLease).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	default:
		return false, err
	}
}

// baselineRelease deletes key if token still owns it.
func baselineRelease(ctx context.Context, c *redis.Client, key, token string) error {
	n, err := unlockScript.Run(ctx, c, []string{key}, token).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return errBaselineNotHeld
	}
	return nil
}

// rtCounter is a go-redis hook that counts round trips (a command or a whole pipeline) and commands.
// Pub/sub traffic does not go through hooks: redis.PubSub writes its commands on its own connection
// without calling ProcessHook, and pushed messages are read, not sent.
type rtCounter struct {
	rt   atomic.Int64
	cmds atomic.Int64
}

func (h *rtCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *rtCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.rt.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *rtCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.rt.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// checkLeaks registers, first, a cleanup that fails b if goroutines started after this call are still
// running once every later cleanup (clients, coordinators) has run.
func checkLeaks(b *testing.B) {
	b.Helper()
	ignore := goleak.IgnoreCurrent()
	b.Cleanup(func() {
		if err := goleak.Find(ignore); err != nil {
			b.Errorf("goroutines leaked by the benchmark: %v", err)
		}
	})
}

// newClient returns a go-redis client with default options on srv, with a round-trip counter hook,
// closed at cleanup.
func newClient(b *testing.B, srv *redistest.Server) (*redis.Client, *rtCounter) {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	h := &rtCounter{}
	c.AddHook(h)
	b.Cleanup(func() { _ = c.Close() })
	return c, h
}

// newAddrClient returns a go-redis client with default options on the server at addr, closed at cleanup.
func newAddrClient(b *testing.B, addr string) *redis.Client {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// newCoordinator returns a coordinator on client, closed at cleanup.
func newCoordinator(b *testing.B, client redis.UniversalClient, opts ...coordinator.Option) *coordinator.Coordinator {
	b.Helper()
	c, err := coordinator.New(client, opts...)
	if err != nil {
		b.Fatalf("coordinator.New: %v", err)
	}
	registryKeys.Lock()
	registryKeys.keys = append(registryKeys.keys, redisops.ProcessKey(c.ID()))
	registryKeys.Unlock()
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// registryKeys are the process registry's keys of the coordinators newCoordinator made: a
// coordinator keeps its key while it runs, and lockKeys does not count them.
var registryKeys struct {
	sync.Mutex
	keys []string
}

// ops returns how many operations a run performs: b.N, but at least floor.
func ops(b *testing.B, floor int) int { return max(b.N, floor) }

// percentile returns the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// mean returns the mean of ds, 0 for none.
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of xs, or 0 when xs is empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// commandCalls returns the calls= figure of every command in INFO commandstats, read on a fresh
// connection so that it does not count against any benchmarked client.
func commandCalls(b *testing.B, addr string) map[string]int64 {
	b.Helper()
	body := info(b, addr, "commandstats")
	calls := make(map[string]int64)
	for _, line := range strings.Split(body, "\r\n") {
		// cmdstat_publish:calls=3,usec=...
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls
}

// info returns the section of INFO of the server at addr, read on a fresh connection so that it does
// not count against any benchmarked client.
func info(b *testing.B, addr, section string) string {
	b.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		b.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("INFO " + section + "\r\n")); err != nil {
		b.Fatalf("INFO %s: %v", section, err)
	}
	r := bufio.NewReader(conn)
	hdr, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(hdr, "$") {
		b.Fatalf("INFO %s: %q, %v", section, hdr, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(hdr[1:]))
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		b.Fatalf("INFO %s: %v", section, err)
	}
	return string(body)
}
