package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// result is what one run of the command gave.
type result struct {
	code           int
	stdout, stderr string
}

// lockwarden runs the command with args (and stdin) in this process.
func lockwarden(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// mustRun runs the command and fails the test unless it succeeds.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	r := lockwarden(t, "", args...)
	if r.code != 0 {
		t.Fatalf("lockwarden %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	return r.stdout
}

// newCoordinator returns a coordinator on client, closed at cleanup.
func newCoordinator(t *testing.T, client redis.UniversalClient) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitRegistered waits until the coordinator's process registration is in Redis.
func waitRegistered(t *testing.T, c *coordinator.Coordinator) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		procs, err := c.Processes(t.Context(), c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if len(procs) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the coordinator did not register within 5s")
		}
		<-tick.C
	}
}

// deployment is one kind of Redis deployment and the flags that reach it.
type deployment struct {
	name   string
	client func(t *testing.T) (redis.UniversalClient, []string)
}

var deployments = []deployment{
	{"single", func(t *testing.T) (redis.UniversalClient, []string) {
		srv := redistest.Start(t)
		return srv.Client(t), []string{"--addr", srv.Addr()}
	}},
	{"sentinel", func(t *testing.T) (redis.UniversalClient, []string) {
		rs := redistest.StartReplicaSet(t, 2)
		s := redistest.StartSentinels(t, rs, 1)
		opts := s.FailoverOptions()
		return s.FailoverClient(t), []string{"--sentinel", strings.Join(s.Addrs(), ","), "--master", opts.MasterName}
	}},
	{"cluster", func(t *testing.T) (redis.UniversalClient, []string) {
		cl := redistest.StartCluster(t, 3)
		return cl.Client(t), []string{"--cluster", "--addr", strings.Join(cl.Addrs(), ",")}
	}},
}

// TestCommands runs inspect, list, processes and force-unlock against a single server, a Sentinel
// deployment and a Cluster, on locks that a coordinator holds.
func TestCommands(t *testing.T) {
	t.Parallel()
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			client, flags := d.client(t)
			c := newCoordinator(t, client)
			waitRegistered(t, c)
			ctx := t.Context()
			name := "cli:" + d.name + ":orders:42"
			m := c.Mutex(name)
			for range 2 {
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			rw := c.RWMutex("cli:" + d.name + ":catalog")
			if err := rw.RLock(ctx); err != nil {
				t.Fatal(err)
			}
			sem := c.Semaphore("cli:" + d.name + ":slots")
			if ok, err := sem.TrySetPermits(ctx, 3); !ok || err != nil {
				t.Fatal(ok, err)
			}
			args := func(a ...string) []string { return append(append([]string{}, flags...), a...) }

			// inspect, for people: the holder, its count, its process, the lease and the token.
			out := mustRun(t, args("inspect", name)...)
			host, _ := os.Hostname()
			for _, want := range []string{name + ": lock", "held by " + m.Owner() + " x2", host, "fencing token", "lease "} {
				if !strings.Contains(out, want) {
					t.Fatalf("inspect output lacks %q:\n%s", want, out)
				}
			}
			// inspect --json, flags after the name.
			var in coordinator.Inspection
			if err := json.Unmarshal([]byte(mustRun(t, args("inspect", name, "--json")...)), &in); err != nil {
				t.Fatal(err)
			}
			if len(in.Holders) != 1 || in.Holders[0].Owner != m.Owner() || in.Holders[0].Count != 2 ||
				in.Holders[0].Process == nil || in.Holders[0].Process.PID != os.Getpid() || in.Token != m.Token() {
				t.Fatalf("inspect --json = %+v", in)
			}

			// list: the three names, one line each, and as JSON.
			out = mustRun(t, args("list", "cli:"+d.name+":*")...)
			for _, want := range []string{name, rw.Name(), sem.Name(), "read-write lock"} {
				if !strings.Contains(out, want) {
					t.Fatalf("list output lacks %q:\n%s", want, out)
				}
			}
			var all []coordinator.Inspection
			if err := json.Unmarshal([]byte(mustRun(t, args("--json", "list", "cli:"+d.name+":*")...)), &all); err != nil {
				t.Fatal(err)
			}
			if len(all) != 3 {
				t.Fatalf("list --json: %d names, want 3: %+v", len(all), all)
			}

			// processes: the coordinator's registration.
			if out := mustRun(t, args("processes")...); !strings.Contains(out, c.ID()) {
				t.Fatalf("processes output lacks %s:\n%s", c.ID(), out)
			}

			// force-unlock: refused without confirmation, done with it.
			r := lockwarden(t, "n\n", args("force-unlock", name)...)
			if r.code != 1 || !strings.Contains(r.stderr, "nothing removed") {
				t.Fatalf("force-unlock answered no: %+v", r)
			}
			if held, _ := m.IsHeld(ctx); !held {
				t.Fatal("force-unlock answered no, and the lock is gone")
			}
			r = lockwarden(t, "yes\n", args("force-unlock", name)...)
			if r.code != 0 || !strings.Contains(r.stdout, "force-unlocked lock "+name) || !strings.Contains(r.stdout, m.Owner()) {
				t.Fatalf("force-unlock confirmed: %+v", r)
			}
			if locked, err := m.IsLocked(ctx); locked || err != nil {
				t.Fatalf("after force-unlock: locked %v, %v", locked, err)
			}
			// A read-write lock in read mode, without asking.
			if out := mustRun(t, args("force-unlock", "--yes", rw.Name())...); !strings.Contains(out, "force-unlocked read-write lock") {
				t.Fatalf("force-unlock of the read-write lock:\n%s", out)
			}
			if locked, err := rw.Read().IsLocked(ctx); locked || err != nil {
				t.Fatalf("after force-unlock: read-write lock locked %v, %v", locked, err)
			}
			// A semaphore is not a lock: one line, exit 1, nothing changed.
			r = lockwarden(t, "", args("force-unlock", "--yes", sem.Name())...)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "not a lock") {
				t.Fatalf("force-unlock of a semaphore: %+v", r)
			}
			if n, err := sem.AvailablePermits(ctx); n != 3 || err != nil {
				t.Fatalf("after a refused force-unlock: %d permits, %v", n, err)
			}
		})
	}
}

// TestWatch follows a coordinator's event journal.
func TestWatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	stream := "cli:" + t.Name() + ":events"
	c, err := coordinator.New(srv.Client(t), coordinator.WithEventJournal(stream, 1000))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	m := c.Mutex("cli:watched")
	if err := m.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "--addr", srv.Addr(), "watch", "--stream", stream, "--from", "0", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "acquired") || !strings.Contains(lines[1], "released") ||
		!strings.Contains(lines[0], "cli:watched") {
		t.Fatalf("watch output:\n%s", out)
	}
	out = mustRun(t, "--addr", srv.Addr(), "--json", "watch", "--stream", stream, "--from", "0", "--limit", "1")
	var ev journalJSON
	if err := json.Unmarshal([]byte(out), &ev); err != nil || ev.Event.Type != "acquired" || ev.Event.Owner != m.Owner() {
		t.Fatalf("watch --json: %q (%v)", out, err)
	}
	// New events only: a lock taken after watch started.
	done := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		code := run(context.Background(), []string{"--addr", srv.Addr(), "watch", "--stream", stream, "--limit", "1"}, nil, &o, &e)
		done <- result{code, o.String(), e.String()}
	}()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		// Lock and unlock until the watcher, which reads from when it started, has seen one.
		if err := m.Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r.code != 0 || !strings.Contains(r.stdout, "cli:watched") {
				t.Fatalf("watch of new events: %+v", r)
			}
			return
		case <-deadline:
			t.Fatal("watch saw no new event within 10s")
		case <-tick.C:
		}
	}
}

// TestBadInput: bad usage and an unreachable Redis get one line and a non-zero exit, from the built
// command too (no stack trace).
func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "no command given"},
		{[]string{"bogus"}, 2, "unknown command"},
		{[]string{"inspect"}, 2, "at least one NAME"},
		{[]string{"inspect", ""}, 2, "must not be empty"},
		{[]string{"force-unlock", "a", "b"}, 2, "one NAME"},
		{[]string{"--no-such-flag", "list"}, 2, "flag provided but not defined"},
		{[]string{"--cluster", "--sentinel", "x:1", "list"}, 2, "exclude each other"},
		{[]string{"--tls-cert", "x.pem", "list"}, 2, "go together"},
		{[]string{"--tls-ca", "/no/such/file", "list"}, 1, "--tls-ca"},
		{[]string{"--addr", "127.0.0.1:1", "list"}, 1, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"--addr", "127.0.0.1:1", "--timeout", "0s", "list"}, 2, "--timeout"},
	} {
		r := lockwarden(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("lockwarden %q: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
		if tc.args != nil && strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("lockwarden %q: stderr is not one line: %q", tc.args, r.stderr)
		}
	}
	bin := filepath.Join(t.TempDir(), "lockwarden")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--addr", "127.0.0.1:1", "--timeout", "2s", "inspect", "x")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || err == nil {
		t.Fatalf("unreachable Redis: exit %d, want 1", code)
	}
	if got := stderr.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "lockwarden: cannot reach Redis") {
		t.Fatalf("unreachable Redis: stderr %q, want one line", got)
	}
}

// TestForceUnlockChecksWhatWasConfirmed: a lock that changes hands while the question is asked is
// left alone; an interrupt at the question removes nothing; "--" ends the flags.
func TestForceUnlockChecksWhatWasConfirmed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, b := newCoordinator(t, srv.Client(t)), newCoordinator(t, srv.Client(t))
	ctx := t.Context()
	name := "cli:" + t.Name()
	first := a.Mutex(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The answer comes once the lock has changed hands: first unlocks, second takes it.
	second := b.Mutex(name)
	stdin, answer := io.Pipe()
	asked := &promptWatcher{asked: make(chan struct{})}
	done := make(chan result, 1)
	go func() {
		var o bytes.Buffer
		code := run(ctx, []string{"--addr", srv.Addr(), "force-unlock", name}, stdin, &o, asked)
		done <- result{code, o.String(), asked.String()}
	}()
	select {
	case <-asked.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("force-unlock did not ask within 5s")
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := answer.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.stderr, "changed while the question was asked") {
		t.Fatalf("force-unlock after the lock changed hands: %+v", r)
	}
	if held, err := second.IsHeld(ctx); !held || err != nil {
		t.Fatalf("the new holder lost its lock: %v, %v", held, err)
	}

	// An interrupt (ctx ending) at the question: nothing removed, the command returns.
	ictx, interrupt := context.WithCancel(ctx)
	blocked, _ := io.Pipe() // nobody answers
	asked = &promptWatcher{asked: make(chan struct{})}
	go func() {
		var o bytes.Buffer
		code := run(ictx, []string{"--addr", srv.Addr(), "force-unlock", name}, blocked, &o, asked)
		done <- result{code, o.String(), asked.String()}
	}()
	select {
	case <-asked.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("force-unlock did not ask within 5s")
	}
	interrupt()
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.stderr, "interrupted") {
			t.Fatalf("force-unlock interrupted: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("force-unlock did not return within 5s of the interrupt")
	}
	if held, err := second.IsHeld(ctx); !held || err != nil {
		t.Fatalf("an interrupted force-unlock freed the lock: %v, %v", held, err)
	}

	// Names after "--" are names, even when they look like flags.
	out := mustRun(t, "--addr", srv.Addr(), "inspect", "--", "-x", "--json")
	if !strings.Contains(out, "-x: not held") || !strings.Contains(out, "--json: not held") {
		t.Fatalf("inspect -- -x --json:\n%s", out)
	}
}

// promptWatcher is a standard error that closes asked once the force-unlock question was written.
type promptWatcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	asked chan struct{}
	once  sync.Once
}

func (p *promptWatcher) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.buf.Write(b)
	if strings.Contains(p.buf.String(), "[y/N]") {
		p.once.Do(func() { close(p.asked) })
	}
	return n, err
}

func (p *promptWatcher) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}
