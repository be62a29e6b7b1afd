package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// topologyTimeout bounds how long the topology helpers (replication,
	// Sentinel, Cluster) wait for the servers to agree on their roles.
	topologyTimeout = 15 * time.Second
	// topologyPoll is the interval between probes while waiting.
	topologyPoll = 20 * time.Millisecond
	// probeTimeout bounds one probe of a server.
	probeTimeout = time.Second
)

// A ReplicaSet is a master with replicas, started by [StartReplicaSet]. Its
// fields describe the roles at start; after a failover (see
// [Sentinels.Failover]) the current master is whichever server the
// Sentinels report.
type ReplicaSet struct {
	// Master is the server the replicas replicate at start.
	Master *Server
	// Replicas replicate Master at start, in the order they were started.
	Replicas []*Server
}

// Servers returns the master followed by the replicas.
func (rs *ReplicaSet) Servers() []*Server {
	return append([]*Server{rs.Master}, rs.Replicas...)
}

// StartReplicaSet starts a master and n replicas of it (each with
// --replicaof 127.0.0.1 <master port>, and every server with
// --repl-diskless-sync-delay 0 so that a sync starts at once), and waits until every replica is in
// sync as [WaitInSync] defines it. The options apply to every server. Like
// [Start], it registers cleanups that stop every process, and it fails the
// test with tb.Fatalf if a server does not start or the replicas are not in
// sync within 15 seconds.
func StartReplicaSet(tb testing.TB, n int, opts ...Option) *ReplicaSet {
	tb.Helper()
	if n < 0 {
		tb.Fatalf("redistest: StartReplicaSet: negative replica count %d", n)
	}
	opts = append([]Option{fastSync}, opts...)
	rs := &ReplicaSet{Master: Start(tb, opts...)}
	for range n {
		rs.Replicas = append(rs.Replicas, startReplicaOf(tb, rs.Master, opts...))
	}
	WaitInSync(tb, rs.Master, rs.Replicas...)
	return rs
}

// StartReplica starts a redis-server that replicates master (--replicaof;
// both get repl-diskless-sync-delay 0 as in [StartReplicaSet], the master
// with CONFIG SET) and waits until it is in sync as [WaitInSync] defines it. It fails the
// test like [StartReplicaSet].
func StartReplica(tb testing.TB, master *Server, opts ...Option) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := master.admin().ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		tb.Fatalf("redistest: CONFIG SET repl-diskless-sync-delay 0 on %s: %v", master.Addr(), err)
	}
	r := startReplicaOf(tb, master, append([]Option{fastSync}, opts...)...)
	WaitInSync(tb, master, r)
	return r
}

// fastSync makes a server that becomes a master start a full sync at once:
// by default Redis waits 5 seconds for more replicas to share a diskless
// transfer.
func fastSync(c *config) {
	c.args = append(c.args, "--repl-diskless-sync-delay", "0")
}

func startReplicaOf(tb testing.TB, master *Server, opts ...Option) *Server {
	tb.Helper()
	opts = append(append([]Option(nil), opts...),
		WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(master.Port())))
	return Start(tb, opts...)
}

// WaitInSync waits until master reports role:master and every one of
// replicas as a connected replica in state online whose replication offset
// equals the master's, and every replica reports role:slave of master with
// master_link_status:up and no sync in progress. A replica that is in sync
// has every write the master acknowledged before the call.
//
// It works for any roles, so it can also wait for a topology that a
// failover rebuilt. It fails the test with tb.Fatalf, quoting the last
// INFO replication seen, if that does not happen within 15 seconds.
func WaitInSync(tb testing.TB, master *Server, replicas ...*Server) {
	tb.Helper()
	waitUntil(tb, "replicas in sync with "+master.Addr(), func(ctx context.Context) (bool, string) {
		mi, err := infoReplication(ctx, master)
		if err != nil {
			return false, fmt.Sprintf("master %s: %v", master.Addr(), err)
		}
		if mi["role"] != "master" {
			return false, fmt.Sprintf("master %s reports role %q", master.Addr(), mi["role"])
		}
		online := make(map[int]string) // replica port -> offset
		for k, v := range mi {
			if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "state=") {
				continue
			}
			f := fields(v)
			if f["ip"] == "127.0.0.1" && f["state"] == "online" {
				port, _ := strconv.Atoi(f["port"])
				online[port] = f["offset"]
			}
		}
		for _, r := range replicas {
			off, ok := online[r.Port()]
			if !ok {
				return false, fmt.Sprintf("master %s does not list %s as an online replica: %v", master.Addr(), r.Addr(), mi)
			}
			if off != mi["master_repl_offset"] {
				return false, fmt.Sprintf("replica %s at offset %s, master at %s", r.Addr(), off, mi["master_repl_offset"])
			}
			ri, err := infoReplication(ctx, r)
			if err != nil {
				return false, fmt.Sprintf("replica %s: %v", r.Addr(), err)
			}
			if ri["role"] != "slave" || ri["master_port"] != strconv.Itoa(master.Port()) ||
				ri["master_link_status"] != "up" || ri["master_sync_in_progress"] != "0" {
				return false, fmt.Sprintf("replica %s: %v", r.Addr(), ri)
			}
		}
		return true, ""
	})
}

// Role returns the role the server reports in INFO replication: "master"
// or "slave". It fails the test if the server does not answer.
func (s *Server) Role(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	info, err := infoReplication(ctx, s)
	if err != nil {
		tb.Fatalf("redistest: INFO replication on %s: %v", s.Addr(), err)
	}
	return info["role"]
}

// infoReplication returns the fields of INFO replication on s.
func infoReplication(ctx context.Context, s *Server) (map[string]string, error) {
	text, err := s.admin().Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

// parseInfo parses the "key:value" lines of an INFO or CLUSTER INFO reply.
func parseInfo(text string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// fields parses "a=1,b=2" as INFO prints a replica.
func fields(v string) map[string]string {
	m := make(map[string]string)
	for _, kv := range strings.Split(v, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// admin returns the client the harness itself uses to probe s: no retries,
// short timeouts. It is closed when s is cleaned up.
func (s *Server) admin() *redis.Client {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.adminC == nil {
		s.adminC = redis.NewClient(&redis.Options{
			Addr:                  s.Addr(),
			MaxRetries:            -1,
			DialTimeout:           probeTimeout,
			ReadTimeout:           probeTimeout,
			WriteTimeout:          probeTimeout,
			ContextTimeoutEnabled: true,
			PoolSize:              2,
		})
	}
	return s.adminC
}

// closeAdmin closes the probe clients, if any.
func (s *Server) closeAdmin() {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.adminC != nil {
		_ = s.adminC.Close()
		s.adminC = nil
	}
	if s.sentinelC != nil {
		_ = s.sentinelC.Close()
		s.sentinelC = nil
	}
}

// waitUntil polls cond every 20ms until it reports true, and fails the test
// with what and cond's last explanation if that takes more than 15 seconds.
func waitUntil(tb testing.TB, what string, cond func(ctx context.Context) (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(topologyTimeout)
	tick := time.NewTicker(topologyPoll)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		ok, why := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: %s: not reached within %v; last seen: %s", what, topologyTimeout, why)
		}
		<-tick.C
	}
}

// StartReplicaVia starts a redis-server that replicates master through a
// new [Proxy] (--replicaof the proxy's address; both servers get
// repl-diskless-sync-delay 0 as in [StartReplica]), and waits until the
// replica has acknowledged every write the master had when it was started.
// It returns the replica and the proxy that carries its replication stream.
//
// The proxy makes a replica that lags on demand: [Proxy.Stall] holds the
// replication stream back while both servers stay up (the master still
// lists the replica as online, and Sentinels still reach it directly), and
// [Proxy.Disable] drops what the proxy held back, as a crash of the master
// would drop what it had not sent yet. Kill the master and then Disable the
// proxy, and the replica keeps only what it had when the stall began.
//
// A Sentinel points a replica that replicates another address than the
// master's back at the master itself once the master's failover-timeout has
// passed (+fix-slave-config); see [Sentinels.SetFailoverTimeout].
// StartReplicaVia fails the test like [StartReplicaSet].
func StartReplicaVia(tb testing.TB, master *Server, opts ...Option) (*Server, *Proxy) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := master.admin().ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		tb.Fatalf("redistest: CONFIG SET repl-diskless-sync-delay 0 on %s: %v", master.Addr(), err)
	}
	link := NewProxy(tb, master.Addr())
	_, port, err := net.SplitHostPort(link.Addr())
	if err != nil {
		tb.Fatalf("redistest: proxy address %s: %v", link.Addr(), err)
	}
	opts = append(append([]Option{fastSync}, opts...), WithArgs("--replicaof", "127.0.0.1", port))
	r := Start(tb, opts...)
	WaitReplicated(tb, master)
	return r, link
}

// WaitReplicated waits until every replica attached to master has
// acknowledged every write master had when WaitReplicated was called, and
// at least one replica is attached and has acknowledged a write: it writes a
// probe key of its own and sends WAIT on the same connection. It works
// whatever address the replicas replicate (a [Proxy] included), and fails
// the test with tb.Fatalf if that does not happen within 15 seconds.
func WaitReplicated(tb testing.TB, master *Server) {
	tb.Helper()
	probe := "redistest:replicated:" + strconv.Itoa(master.Port())
	waitUntil(tb, "replicas of "+master.Addr()+" acknowledged its writes", func(ctx context.Context) (bool, string) {
		mi, err := infoReplication(ctx, master)
		if err != nil {
			return false, fmt.Sprintf("master %s: %v", master.Addr(), err)
		}
		n, err := strconv.Atoi(mi["connected_slaves"])
		if err != nil || n == 0 {
			return false, fmt.Sprintf("master %s has no replica: %v", master.Addr(), mi)
		}
		pipe := master.admin().Pipeline()
		pipe.Incr(ctx, probe)
		wait := pipe.Do(ctx, "wait", n, 100)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, fmt.Sprintf("INCR and WAIT on %s: %v", master.Addr(), err)
		}
		if acked, err := wait.Int(); err != nil || acked < n {
			return false, fmt.Sprintf("WAIT %d on %s: %d acknowledged, %v", n, master.Addr(), acked, err)
		}
		return true, ""
	})
}
