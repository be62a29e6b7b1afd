package redisops_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

var (
	// incrScript counts its runs on KEYS[1] and answers the count.
	incrScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	// pushScript appends ARGV[1] to the list KEYS[1] and answers the list's length.
	pushScript = redis.NewScript(`return redis.call('RPUSH', KEYS[1], ARGV[1])`)
	// echoScript answers its key and argument.
	echoScript = redis.NewScript(`return {KEYS[1], ARGV[1]}`)
)

// rtCounter is a go-redis hook that counts the round trips (a command or a whole pipeline) that carry
// scripts, and the script calls. The handshake of a new connection, which go-redis sends through the
// hooks too, is not counted.
type rtCounter struct {
	rt, cmds atomic.Int64
}

func (h *rtCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *rtCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScriptCall(cmd) {
			h.rt.Add(1)
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *rtCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if isScriptCall(cmd) {
				n++
			}
		}
		if n > 0 {
			h.rt.Add(1)
			h.cmds.Add(int64(n))
		}
		return next(ctx, cmds)
	}
}

// isScriptCall reports whether cmd is EVAL or EVALSHA.
func isScriptCall(cmd redis.Cmder) bool {
	name := cmd.Name()
	return name == "eval" || name == "evalsha"
}

// counted returns a client on srv with opts (Addr set here) and a round-trip counter, closed at cleanup.
func counted(t *testing.T, srv *redistest.Server, opts redis.Options) (*redis.Client, *rtCounter) {
	t.Helper()
	opts.Addr = srv.Addr()
	c := redis.NewClient(&opts)
	h := &rtCounter{}
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c, h
}

// waitFor polls cond until it holds, failing the test after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// loadTestScripts loads scripts into the server, so that EVALSHA finds them and a call is one round trip.
func loadTestScripts(t *testing.T, c *redis.Client, scripts ...*redis.Script) {
	t.Helper()
	for _, s := range scripts {
		if err := s.Load(t.Context(), c).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
}

// fillSlots pauses srv and starts one call per round trip of b (key prefix+"slot:i"), so that every
// later call must wait. It returns a wait function for those calls' results.
func fillSlots(t *testing.T, srv *redistest.Server, b *redisops.Batcher, h *rtCounter, script *redis.Script, prefix string) func() []error {
	t.Helper()
	return fillSlotsCtx(t, context.Background(), srv, b, h, script, prefix)
}

// fillSlotsCtx is fillSlots with calls made with ctx.
func fillSlotsCtx(t *testing.T, ctx context.Context, srv *redistest.Server, b *redisops.Batcher, h *rtCounter, script *redis.Script, prefix string) func() []error {
	t.Helper()
	srv.Pause()
	start := h.rt.Load()
	errs := make([]error, redisops.DefaultPipelines)
	var wg sync.WaitGroup
	for i := range redisops.DefaultPipelines {
		wg.Go(func() {
			errs[i] = b.Do(ctx, script, []string{prefix + "slot:" + strconv.Itoa(i)}).Err()
		})
	}
	waitFor(t, "the round trips to start", func() bool { return h.rt.Load()-start == redisops.DefaultPipelines })
	return func() []error { wg.Wait(); return errs }
}

// TestBatcherPipelinesPendingCalls: while every round trip is under way, the calls of 28 goroutines
// wait, and then all go together in one pipeline, each answered with its own reply.
func TestBatcherPipelinesPendingCalls(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadTestScripts(t, c, echoScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	before := h.rt.Load()
	slots := fillSlots(t, srv, b, h, echoScript, "batcher:pipelines:")
	const n = 28
	got := make([]any, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = b.Do(t.Context(), echoScript, []string{fmt.Sprintf("batcher:pipelines:%d", i)}, i).Result()
		})
	}
	waitFor(t, "the calls to queue", func() bool { return redisops.QueuedCalls(b) == n })
	srv.Resume()
	wg.Wait()
	for i, err := range slots() {
		if err != nil {
			t.Errorf("call %d under way: %v", i, err)
		}
	}
	for i := range n {
		want := fmt.Sprintf("[batcher:pipelines:%d %d]", i, i)
		if errs[i] != nil || fmt.Sprint(got[i]) != want {
			t.Errorf("call %d: got %v, %v, want %s", i, got[i], errs[i], want)
		}
	}
	if rt := h.rt.Load() - before; rt != redisops.DefaultPipelines+1 {
		t.Errorf("round trips: got %d, want %d (one per call under way, one for the %d pending)", rt,
			redisops.DefaultPipelines+1, n)
	}
}

// TestOpsBatchesConcurrentCalls: the lock calls of many goroutines reach Redis through the batcher:
// while every round trip is under way, the acquisitions of the others wait and go in one pipeline.
func TestOpsBatchesConcurrentCalls(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadScripts(t, c)
	ops := redisops.New(c)
	const n = 32
	before := h.rt.Load()
	srv.Pause()
	errs := make([]error, n)
	held := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := ops.Acquire(t.Context(), fmt.Sprintf("batcher:ops:%d", i), "owner", lease, 0)
			held[i], errs[i] = a.OK, err
		})
	}
	waitFor(t, "every call to be sent or queued", func() bool {
		return h.rt.Load()-before+int64(redisops.QueuedCalls(redisops.BatcherOf(ops))) == n
	})
	srv.Resume()
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !held[i] {
			t.Errorf("acquire %d: got %v, %v, want held", i, held[i], errs[i])
		}
	}
	if rt := h.rt.Load() - before; rt != redisops.DefaultPipelines+1 {
		t.Errorf("round trips for %d acquisitions: got %d, want %d", n, rt, redisops.DefaultPipelines+1)
	}
}

// TestBatcherPerCallerOrder: each goroutine's calls run in the order it makes them, while the calls of
// all of them are batched together.
func TestBatcherPerCallerOrder(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadTestScripts(t, c, pushScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	const callers, calls = 16, 100
	before := h.rt.Load()
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			key := fmt.Sprintf("batcher:order:%d", g)
			for i := range calls {
				n, err := b.Do(t.Context(), pushScript, []string{key}, i).Int64()
				if err == nil && n != int64(i+1) {
					err = fmt.Errorf("call %d: list length %d, want %d", i, n, i+1)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for g := range callers {
		if errs[g] != nil {
			t.Fatalf("caller %d: %v", g, errs[g])
		}
		checkList(t, c, fmt.Sprintf("batcher:order:%d", g), calls)
	}
	t.Logf("%d calls in %d round trips", callers*calls, h.rt.Load()-before)
}

// checkList fails unless the list key holds 0, 1, ..., n-1.
func checkList(t *testing.T, c *redis.Client, key string, n int) {
	t.Helper()
	got, err := c.LRange(t.Context(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %q: %v", key, err)
	}
	if len(got) != n {
		t.Fatalf("LRANGE %q: got %d elements, want %d", key, len(got), n)
	}
	for i, v := range got {
		if v != strconv.Itoa(i) {
			t.Fatalf("LRANGE %q: element %d is %s, want %d", key, i, v, i)
		}
	}
}

// TestBatcherNoScript: calls of a pipeline whose script the server does not have (SCRIPT FLUSH) are
// answered NOSCRIPT, sent again with EVAL, and each runs exactly once.
func TestBatcherNoScript(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadTestScripts(t, c, echoScript, incrScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	if err := b.Do(t.Context(), incrScript, []string{"batcher:noscript:warm"}).Err(); err != nil {
		t.Fatalf("warm-up call: %v", err)
	}
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	// The calls under way load echoScript again with EVAL; incrScript stays unknown.
	slots := fillSlots(t, srv, b, h, echoScript, "batcher:noscript:")
	const n = 8
	got := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = b.Do(t.Context(), incrScript, []string{fmt.Sprintf("batcher:noscript:%d", i)}).Int64()
		})
	}
	waitFor(t, "the calls to queue", func() bool { return redisops.QueuedCalls(b) == n })
	srv.Resume()
	wg.Wait()
	for i, err := range slots() {
		if err != nil {
			t.Errorf("call %d under way: %v", i, err)
		}
	}
	for i := range n {
		if errs[i] != nil || got[i] != 1 {
			t.Errorf("call %d: got %d, %v, want 1", i, got[i], errs[i])
		}
		if v, err := c.Get(t.Context(), fmt.Sprintf("batcher:noscript:%d", i)).Int(); err != nil || v != 1 {
			t.Errorf("runs of call %d: got %d, %v, want 1", i, v, err)
		}
	}
}

// TestBatcherContextEndedBeforeSend: a call whose context ends while it waits for a round trip is
// answered with the context's error and never sent, while the calls pending with it run; a call with
// an ended context returns at once.
func TestBatcherContextEndedBeforeSend(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadTestScripts(t, c, incrScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)

	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Do(ended, incrScript, []string{"batcher:ctx:ended"}).Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("call with an ended context: got %v, want %v", err, context.Canceled)
	}

	slots := fillSlots(t, srv, b, h, incrScript, "batcher:ctx:")
	ctx, cancel := context.WithCancel(t.Context())
	var gone, kept error
	var wg sync.WaitGroup
	wg.Go(func() { gone = b.Do(ctx, incrScript, []string{"batcher:ctx:gone"}).Err() })
	waitFor(t, "the first call to queue", func() bool { return redisops.QueuedCalls(b) == 1 })
	wg.Go(func() { kept = b.Do(t.Context(), incrScript, []string{"batcher:ctx:kept"}).Err() })
	waitFor(t, "the second call to queue", func() bool { return redisops.QueuedCalls(b) == 2 })
	cancel()
	srv.Resume()
	wg.Wait()
	slots()
	if !errors.Is(gone, context.Canceled) {
		t.Errorf("call whose context ended while queued: got %v, want %v", gone, context.Canceled)
	}
	if kept != nil {
		t.Errorf("call queued with it: got %v, want nil", kept)
	}
	for key, want := range map[string]int64{"batcher:ctx:ended": 0, "batcher:ctx:gone": 0, "batcher:ctx:kept": 1} {
		if n, err := c.Exists(t.Context(), key).Result(); err != nil || n != want {
			t.Errorf("EXISTS %s: got %d, %v, want %d", key, n, err, want)
		}
	}
}

// TestBatcherServerPausedMidBatch: calls under way and pending on a paused server all fail with the
// client's timeout, and the calls made after it resumes succeed.
func TestBatcherServerPausedMidBatch(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	loadTestScripts(t, c, incrScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	t.Cleanup(srv.Resume)
	slots := fillSlots(t, srv, b, h, incrScript, "batcher:paused:")
	errs := queueCalls(t, b, "batcher:paused:")
	checkAllFailed(t, append(slots(), errs()...))
	srv.Resume()
	checkRecovered(t, b, "batcher:paused:")
}

// TestBatcherPipelineBoundedByDeadlines: a pipeline to a server that does not answer ends by the latest
// deadline of its callers when the client honours context deadlines, not after the client's much longer
// ReadTimeout.
func TestBatcherPipelineBoundedByDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{ContextTimeoutEnabled: true, ReadTimeout: 20 * time.Second, MaxRetries: -1})
	loadTestScripts(t, c, incrScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	t.Cleanup(srv.Resume)
	slotCtx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	slots := fillSlotsCtx(t, slotCtx, srv, b, h, incrScript, "batcher:deadline:")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(400+50*i)*time.Millisecond)
			defer cancel()
			errs[i] = b.Do(ctx, incrScript, []string{"batcher:deadline:" + strconv.Itoa(i)}).Err()
		})
	}
	waitFor(t, "the calls to queue or be sent", func() bool { return redisops.QueuedCalls(b) == n || h.rt.Load() > redisops.DefaultPipelines })
	wg.Wait()
	checkAllFailed(t, append(slots(), errs...))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("calls with deadlines under a second took %v, want them bounded by their deadlines", took)
	}
}

// TestBatcherServerKilledMidBatch: calls under way and pending on a server that is killed all fail,
// and once it is back the next calls succeed.
func TestBatcherServerKilledMidBatch(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{MaxRetries: -1})
	loadTestScripts(t, c, incrScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	slots := fillSlots(t, srv, b, h, incrScript, "batcher:killed:")
	errs := queueCalls(t, b, "batcher:killed:")
	srv.Kill()
	checkAllFailed(t, append(slots(), errs()...))
	srv.Restart(t)
	checkRecovered(t, b, "batcher:killed:")
}

// queueCalls starts 8 calls on b that must wait for a round trip, and waits until they do. It returns
// a wait function for their results.
func queueCalls(t *testing.T, b *redisops.Batcher, prefix string) func() []error {
	t.Helper()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = b.Do(context.Background(), incrScript, []string{prefix + strconv.Itoa(i)}).Err()
		})
	}
	waitFor(t, "the calls to queue", func() bool { return redisops.QueuedCalls(b) == n })
	return func() []error { wg.Wait(); return errs }
}

// checkAllFailed fails unless every call failed with an error of the client (a timeout, a closed
// connection), not with a reply of the server.
func checkAllFailed(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		var reply redis.Error
		if err == nil || errors.As(err, &reply) {
			t.Errorf("call %d: got %v, want a connection error", i, err)
		}
	}
}

// checkRecovered fails unless a lone call and a batch of concurrent calls on b succeed.
func checkRecovered(t *testing.T, b *redisops.Batcher, prefix string) {
	t.Helper()
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = b.Do(t.Context(), incrScript, []string{prefix + "after:" + strconv.Itoa(i)}).Err()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d after recovery: %v", i, err)
		}
	}
}

// BenchmarkBatcher compares script calls made directly (one round trip each) with the same calls made
// through a Batcher, on 1 and 32 goroutines, each goroutine on its own key.
func BenchmarkBatcher(b *testing.B) {
	srv := redistest.Start(b)
	for _, goroutines := range []int{1, 32} {
		for _, mode := range []string{"direct", "batched"} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", mode, goroutines), func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
				defer c.Close()
				h := &rtCounter{}
				c.AddHook(h)
				if err := incrScript.Load(b.Context(), c).Err(); err != nil {
					b.Fatalf("SCRIPT LOAD: %v", err)
				}
				bt := redisops.NewBatcher(c, redisops.DefaultPipelines)
				var next atomic.Int64
				b.SetParallelism(max(1, goroutines/runtimeProcs()))
				b.ReportAllocs()
				b.ResetTimer()
				start := h.rt.Load()
				b.RunParallel(func(pb *testing.PB) {
					keys := []string{"bench:batcher:" + strconv.FormatInt(next.Add(1), 10)}
					for pb.Next() {
						var err error
						if mode == "direct" {
							err = incrScript.Run(b.Context(), c, keys).Err()
						} else {
							err = bt.Do(b.Context(), incrScript, keys).Err()
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(h.rt.Load()-start)/float64(b.N), "rt/op")
			})
		}
	}
}

// runtimeProcs returns GOMAXPROCS.
func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// TestBatcherQueuedCallEndsWithItsContext: a call waiting for a round trip returns when its context
// ends, with the context's error, without waiting for a round trip to free up, and is never sent.
func TestBatcherQueuedCallEndsWithItsContext(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{ReadTimeout: 5 * time.Second, MaxRetries: -1})
	loadTestScripts(t, c, incrScript)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	t.Cleanup(srv.Resume)
	slots := fillSlots(t, srv, b, h, incrScript, "batcher:queuedctx:")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.Do(ctx, incrScript, []string{"batcher:queuedctx:gone"}).Err()
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued call whose deadline passed: got %v, want %v", err, context.DeadlineExceeded)
	}
	if took > 2*time.Second {
		t.Errorf("queued call with a 200ms deadline returned after %v, want about 200ms", took)
	}
	if n := redisops.QueuedCalls(b); n != 0 {
		t.Errorf("calls left queued: got %d, want 0", n)
	}
	srv.Resume()
	slots()
	if n, err := c.Exists(t.Context(), "batcher:queuedctx:gone").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of the abandoned call's key: got %d, %v, want 0", n, err)
	}
	checkRecovered(t, b, "batcher:queuedctx:")
}

// TestBatcherPipelineEndsWhenEveryCallerGivesUp: a pipeline carrying several calls stops once every
// caller's context has ended, as a lone call does, rather than going on with the client's retries:
// when they all derive from one context that is cancelled (a coordinator's lifetime), and when each
// caller's own context is cancelled in turn.
func TestBatcherPipelineEndsWhenEveryCallerGivesUp(t *testing.T) {
	for _, mode := range []string{"lifetime", "each"} {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			c, h := counted(t, srv, redis.Options{ContextTimeoutEnabled: true, ReadTimeout: 500 * time.Millisecond,
				MaxRetries: 6, MinRetryBackoff: 100 * time.Millisecond, MaxRetryBackoff: 200 * time.Millisecond})
			loadTestScripts(t, c, incrScript)
			b := redisops.NewBatcher(c, redisops.DefaultPipelines)
			t.Cleanup(srv.Resume)
			slotCtx, slotCancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer slotCancel()
			before := h.rt.Load()
			slots := fillSlotsCtx(t, slotCtx, srv, b, h, incrScript, "batcher:shared:"+mode+":")
			lifetime, cancel := context.WithCancel(t.Context())
			defer cancel()
			const n = 4
			errs := make([]error, n)
			cancels := make([]context.CancelFunc, n)
			var wg sync.WaitGroup
			for i := range n {
				// Each caller's own context, as a lock actor bounds each call.
				ctx, cancel := context.WithTimeout(lifetime, time.Hour)
				cancels[i] = cancel
				wg.Go(func() {
					errs[i] = b.Do(ctx, incrScript, []string{"batcher:shared:" + mode + ":" + strconv.Itoa(i)}).Err()
				})
			}
			waitFor(t, "the pipeline to start", func() bool { return h.rt.Load()-before == redisops.DefaultPipelines+1 })
			if mode == "lifetime" {
				cancel()
			} else {
				for _, cancel := range cancels {
					cancel()
				}
			}
			cancelled := time.Now()
			wg.Wait()
			took := time.Since(cancelled)
			for _, cancel := range cancels {
				cancel()
			}
			slots()
			for i, err := range errs {
				if err == nil {
					t.Errorf("call %d on a paused server: got nil, want an error", i)
				}
			}
			// Without the cancel, the client goes on for 7 attempts of 500ms each.
			if took > 2*time.Second {
				t.Errorf("pipeline returned %v after its callers' contexts ended, want within about one ReadTimeout (500ms)", took)
			}
		})
	}
}

// panicHook panics in the client while armed, on a lone call and on a pipeline alike.
type panicHook struct{ armed atomic.Bool }

func (h *panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() {
			panic("hook panicked")
		}
		return next(ctx, cmd)
	}
}

func (h *panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.armed.Load() {
			panic("hook panicked")
		}
		return next(ctx, cmds)
	}
}

// TestBatcherSurvivesClientPanic: a client that panics (a hook of the application's) answers the
// calls of its round trips with ErrPanicked, lone and pipelined alike, and the batcher's round trips
// stay usable: the calls after it are answered as usual.
func TestBatcherSurvivesClientPanic(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadTestScripts(t, c, echoScript)
	panics := &panicHook{}
	c.AddHook(panics)
	b := redisops.NewBatcher(c, redisops.DefaultPipelines)
	slots := fillSlots(t, srv, b, h, echoScript, "batcher:panic:")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = b.Do(t.Context(), echoScript, []string{fmt.Sprintf("batcher:panic:%d", i)}, i).Err()
		})
	}
	waitFor(t, "the calls to queue", func() bool { return redisops.QueuedCalls(b) == n })
	panics.armed.Store(true)
	srv.Resume()
	slots()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, redisops.ErrPanicked) {
			t.Errorf("queued call %d: %v, want ErrPanicked", i, err)
		}
	}
	if err := b.Do(t.Context(), echoScript, []string{"batcher:panic:lone"}, 1).Err(); !errors.Is(err, redisops.ErrPanicked) {
		t.Errorf("lone call while panicking: %v, want ErrPanicked", err)
	}
	panics.armed.Store(false)
	for i := range 2 * redisops.DefaultPipelines {
		if err := b.Do(t.Context(), echoScript, []string{"batcher:panic:after"}, i).Err(); err != nil {
			t.Fatalf("call %d after the panics: %v", i, err)
		}
	}
}

// TestBatcherNoScriptCommands: acquisitions and releases, whose EVALSHA commands Ops builds whole,
// pipelined together on a server that has forgotten the scripts, run again with EVAL, each once.
func TestBatcherNoScriptCommands(t *testing.T) {
	srv := redistest.Start(t)
	c, h := counted(t, srv, redis.Options{})
	loadTestScripts(t, c, echoScript)
	ops := redisops.New(c)
	b := redisops.BatcherOf(ops)
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	loadTestScripts(t, c, echoScript) // for the calls that fill the round trips
	const n = 8
	run := func(what string, call func(i int) error) {
		evals := commandRuns(t, c, "eval")
		slots := fillSlots(t, srv, b, h, echoScript, "batcher:noscriptcmd:"+what+":")
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = call(i) })
		}
		waitFor(t, "the "+what+" calls to queue", func() bool { return redisops.QueuedCalls(b) == n })
		srv.Resume()
		wg.Wait()
		for i, err := range slots() {
			if err != nil {
				t.Errorf("call %d under way: %v", i, err)
			}
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s %d: %v", what, i, err)
			}
		}
		if got := commandRuns(t, c, "eval") - evals; got != n {
			t.Errorf("%s: %d EVAL calls, want one per call (%d)", what, got, n)
		}
	}
	name := func(i int) string { return fmt.Sprintf("batcher:noscriptcmd:%d", i) }
	run("acquire", func(i int) error {
		got, err := ops.Acquire(t.Context(), name(i), "A", time.Minute, 0)
		if err == nil && (!got.OK || got.HoldCount != 1) {
			err = fmt.Errorf("got %+v, want a first hold", got)
		}
		return err
	})
	for i := range n {
		if v, err := c.HGet(t.Context(), name(i), "A").Int(); err != nil || v != 1 {
			t.Errorf("hold count of %s: %d, %v; want 1", name(i), v, err)
		}
	}
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	loadTestScripts(t, c, echoScript)
	run("release", func(i int) error {
		rel, err := ops.ReleaseHeld(t.Context(), name(i), "A", "A:r1", time.Minute, 1, nil)
		if err == nil && rel.Remaining != 0 {
			err = fmt.Errorf("got %+v, want the lock released", rel)
		}
		return err
	})
	for i := range n {
		if n, err := c.Exists(t.Context(), name(i)).Result(); err != nil || n != 0 {
			t.Errorf("%s after the release: exists %d, %v; want gone", name(i), n, err)
		}
	}
}
