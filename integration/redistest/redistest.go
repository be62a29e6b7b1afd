// Package redistest starts real redis-server processes for tests.
//
// Each [Server] is a child process listening on a free loopback port, with
// persistence disabled and its working directory in a per-test temporary
// directory. Servers are torn down automatically when the test that started
// them finishes, whatever state they are in (running, paused, stopped or
// killed).
//
// Besides starting servers, the package injects faults on the real process:
// [Server.Kill], [Server.Stop], [Server.Restart], [Server.Pause] and
// [Server.Resume]. This lets tests exercise client behaviour against
// crashes, restarts that lose all data, and servers that stop responding
// while keeping their connections open.
//
// For faults that affect only some clients, [NewProxy] puts an in-process
// TCP proxy (built on toxiproxy) in front of a server, with
// [Proxy.Disable] and [Proxy.Enable] (refused and dropped connections),
// [Proxy.Stall] and [Proxy.Unstall] (a partition: connections stay open but
// nothing flows) and [Proxy.AddLatency] and [Proxy.RemoveLatency].
//
// Topologies are built from such servers: [StartReplicaSet] (a master with
// replicas, in sync), [StartSentinels] (Sentinels that monitor a replica
// set, with [Sentinels.FailoverClient] and a forced [Sentinels.Failover])
// and [StartCluster] (a Redis Cluster of masters, with [Cluster.Client]).
// Each returns only once the servers agree on their roles.
//
// The redis-server binary must be on PATH. If it is not, [Start] fails the
// test; it never skips it.
package redistest

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/internal/serverproc"
)

const (
	// readyTimeout bounds how long Start and Restart wait for a freshly
	// spawned redis-server to answer PING.
	readyTimeout = 10 * time.Second
	// readyPoll is the interval between PING probes while waiting.
	readyPoll = 10 * time.Millisecond
	// stopTimeout bounds how long Stop waits for a graceful exit before it
	// falls back to SIGKILL.
	stopTimeout = 10 * time.Second
	// startAttempts is how many times Start picks a fresh port, and Restart
	// retries the same port, when redis-server cannot bind it.
	startAttempts = 5
	// outputLimit is how many trailing bytes of a process's output are kept.
	outputLimit = 64 << 10
	// failureTail is how many trailing bytes of output a failure message
	// quotes.
	failureTail = 4 << 10
)

const notFoundMsg = "redis-server not found on PATH: install it with " +
	"`apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis`"

// An Option configures [Start].
type Option func(*config)

type config struct {
	args []string
	// conf is a configuration file passed first on the command line, as
	// redis-server --sentinel requires; "" for none.
	conf string
	// port, when not 0, is the port to listen on instead of a free one
	// picked by Start; Start then fails rather than pick another.
	port int
	// portArgs, when not nil, returns arguments appended after args that
	// depend on the port, such as a cluster config file named after it.
	portArgs func(port int) []string
}

// WithArgs appends args to the redis-server command line, after the
// arguments Start always passes (--port, --bind, --save "", --appendonly no
// and --dir). Because redis-server applies later arguments last, args can
// override those defaults, except --port, which the Server manages.
//
// Multiple WithArgs options accumulate in order.
func WithArgs(args ...string) Option {
	return func(c *config) {
		c.args = append(c.args, args...)
	}
}

// A Server is a redis-server child process started by [Start].
//
// Addr and Port may be called from any goroutine. The fault-injection
// methods (Kill, Stop, Restart, Pause, Resume) are serialised internally but
// report misuse through the testing.TB, so, like t.FailNow, they must be
// called from the goroutine running the test.
type Server struct {
	tb       testing.TB
	bin      string
	dir      string
	args     []string // from WithArgs
	conf     string   // config file passed first, or ""
	portArgs func(port int) []string
	port     int // fixed for the Server's lifetime

	mu     sync.Mutex
	p      *process // most recently started process; nil only during Start
	paused bool     // p has been sent SIGSTOP and not SIGCONT since

	adminMu sync.Mutex
	adminC  *redis.Client // the harness's own probe client; see admin
	// sentinelC is the harness's probe client of a Sentinel; see sentinel.
	sentinelC *redis.SentinelClient
}

// process is one run of redis-server.
type process struct {
	cmd     *exec.Cmd
	out     *serverproc.Output
	done    chan struct{} // closed once cmd.Wait has returned
	waitErr error         // cmd.Wait's result; read only after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts a redis-server on a free port on 127.0.0.1 and waits until
// it answers PING. The server runs with
//
//	--port <port> --bind 127.0.0.1 --save "" --appendonly no --dir <tb.TempDir()>
//
// followed by any arguments given with [WithArgs], so it persists nothing
// and loses all data when it exits.
//
// Start registers a cleanup with tb that terminates the process (resuming or
// killing it as needed) and waits for it to exit.
//
// Start calls tb.Fatalf if redis-server is not on PATH, or if the server
// does not answer PING within 10 seconds; in the latter case the message
// includes the tail of the server's output. If the chosen port is taken
// before redis-server can bind it, Start retries with another port a few
// times before failing.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redistest: %s", notFoundMsg)
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	s := &Server{
		tb:       tb,
		bin:      bin,
		dir:      tb.TempDir(),
		args:     c.args,
		conf:     c.conf,
		portArgs: c.portArgs,
	}
	// Register the cleanup before spawning anything, so a failure below
	// cannot leak a process.
	tb.Cleanup(s.cleanup)

	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		port := c.port
		if port == 0 {
			if port, err = serverproc.FreePort(); err != nil {
				tb.Fatalf("redistest: picking a free port: %v", err)
			}
		}
		s.port = port
		p, err := s.spawn()
		if err == nil {
			s.p = p
			return s
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts && c.port == 0 {
			continue
		}
		tb.Fatalf("redistest: %v", err)
	}
}

// Addr returns the address the server listens on, as "127.0.0.1:port".
// It does not change across restarts.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the TCP port the server listens on. It does not change
// across restarts.
func (s *Server) Port() int {
	return s.port
}

// Client returns a new go-redis client connected to the server with default
// options. The client is closed by a cleanup registered with tb, which runs
// before the server's own cleanup when tb is the test that started the
// server or one of its subtests.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to the server and waits for it to exit, simulating a
// crash. Open connections are reset and, since persistence is disabled, all
// data is lost. Killing a server that is not running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Stop shuts the server down gracefully with SIGTERM and waits for it to
// exit. A paused server is resumed so that it can handle the signal. If the
// server has not exited after 10 seconds, Stop logs that and kills it.
// Stopping a server that is not running does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p.exited() {
		return
	}
	_ = s.p.cmd.Process.Signal(syscall.SIGTERM)
	if s.paused {
		// A stopped process keeps SIGTERM pending until it is continued.
		_ = s.p.cmd.Process.Signal(syscall.SIGCONT)
		s.paused = false
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-s.p.done:
	case <-timer.C:
		s.tb.Logf("redistest: redis-server on port %d ignored SIGTERM for %v; killing it", s.port, stopTimeout)
		s.kill()
	}
}

// Restart starts the server again on the same port after [Server.Kill] or
// [Server.Stop], or after it exited on its own, and waits until it answers
// PING. The new process starts empty.
//
// Restart calls tb.Fatalf if the server is still running, or if the new
// process does not answer PING within 10 seconds. If the port is briefly
// unavailable, Restart retries a few times before failing.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.p.exited() {
		tb.Fatalf("redistest: Restart: redis-server on port %d is still running; call Kill or Stop first", s.port)
	}
	s.paused = false
	for attempt := 1; ; attempt++ {
		p, err := s.spawn()
		if err == nil {
			s.p = p
			return
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
			continue
		}
		tb.Fatalf("redistest: Restart: %v", err)
	}
}

// Pause suspends the server with SIGSTOP. While paused, the kernel still
// accepts connections and buffers requests, but nothing is answered, so
// clients observe timeouts rather than connection errors. Pausing a paused
// server does nothing. Pause fails the test (with Fatalf on the
// testing.TB passed to [Start]) if the server is not running.
func (s *Server) Pause() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p.exited() {
		s.tb.Fatalf("redistest: Pause: redis-server on port %d is not running", s.port)
	}
	if s.paused {
		return
	}
	if err := s.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.tb.Fatalf("redistest: Pause: %v", err)
	}
	s.paused = true
}

// Resume continues a server suspended by [Server.Pause] with SIGCONT; it
// then answers the requests buffered while it was paused. Resuming a server
// that is not paused, or not running, does nothing.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		return
	}
	s.paused = false
	if !s.p.exited() {
		_ = s.p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// cleanup terminates the current process, if any, whatever its state.
func (s *Server) cleanup() {
	s.closeAdmin()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.kill() // SIGKILL also terminates a stopped process.
	}
}

// kill sends SIGKILL to the current process and waits for it to exit.
// s.mu must be held.
func (s *Server) kill() {
	if !s.p.exited() {
		_ = s.p.cmd.Process.Kill()
		<-s.p.done
	}
	s.paused = false
}

var errAddrInUse = errors.New("address already in use")

// spawn starts redis-server on s.port and waits until it answers PING.
// On failure the process has exited, and the error includes the tail of its
// output; it wraps errAddrInUse if the process could not bind its port.
func (s *Server) spawn() (*process, error) {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
	)
	args = append(args, s.args...)
	if s.portArgs != nil {
		args = append(args, s.portArgs(s.port)...)
	}
	out := serverproc.NewOutput(outputLimit)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	// Do not let a grandchild holding the output pipe block Wait forever.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	addr := s.Addr()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if serverproc.Ping(addr) {
			return p, nil
		}
		select {
		case <-p.done:
			err := fmt.Errorf("redis-server on %s exited before answering PING (%v)%s", addr, p.waitErr, out.Tail(failureTail))
			if strings.Contains(out.String(), "Address already in use") {
				err = fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return nil, err
		case <-deadline.C:
			_ = cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("redis-server on %s did not answer PING within %v%s", addr, readyTimeout, out.Tail(failureTail))
		case <-tick.C:
		}
	}
}
