package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/internal/serverproc"
)

// MasterName is the name under which [Sentinels] monitor their master.
const MasterName = "mymaster"

// Timings of the Sentinels' configuration, short so that tests fail over fast.
const (
	// SentinelDownAfter is down-after-milliseconds: how long the master must
	// be unreachable before a Sentinel considers it down.
	SentinelDownAfter = 1000
	// SentinelFailoverTimeout is failover-timeout, in milliseconds.
	SentinelFailoverTimeout = 3000
)

// Sentinels is a group of Redis Sentinels (redis-server --sentinel) that
// monitor one [ReplicaSet] under the name [MasterName], started by
// [StartSentinels]. Its methods must be called from the goroutine running
// the test.
type Sentinels struct {
	rs      *ReplicaSet
	servers []*Server
	quorum  int
}

// StartSentinels starts k Sentinels on free loopback ports that monitor
// rs.Master as [MasterName] with quorum k/2+1, down-after-milliseconds
// [SentinelDownAfter] and failover-timeout [SentinelFailoverTimeout]. Each
// Sentinel's config file is generated in its own temporary directory and
// already names the replicas and the other Sentinels, so that the group is
// complete at once rather than after a few seconds of discovery.
//
// StartSentinels returns when every Sentinel reports rs.Master as the
// master, with flags "master", every replica of rs as a connected replica
// whose link is ok, and the other k-1 Sentinels. Processes are stopped by
// cleanups registered with tb. It fails the test with tb.Fatalf if k < 1,
// if a Sentinel does not start, or if the group is not complete within 15
// seconds.
func StartSentinels(tb testing.TB, rs *ReplicaSet, k int) *Sentinels {
	tb.Helper()
	if k < 1 {
		tb.Fatalf("redistest: StartSentinels: need at least one Sentinel, got %d", k)
	}
	ports := make([]int, k)
	ids := make([]string, k)
	for i := range k {
		p, err := serverproc.FreePort()
		if err != nil {
			tb.Fatalf("redistest: picking a free port: %v", err)
		}
		ports[i] = p
		var b [20]byte
		_, _ = rand.Read(b[:])
		ids[i] = hex.EncodeToString(b[:])
	}
	s := &Sentinels{rs: rs, quorum: k/2 + 1}
	for i := range k {
		var conf strings.Builder
		fmt.Fprintf(&conf, "sentinel myid %s\n", ids[i])
		fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %d %d\n", MasterName, rs.Master.Port(), s.quorum)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", MasterName, SentinelDownAfter)
		fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", MasterName, SentinelFailoverTimeout)
		fmt.Fprintf(&conf, "sentinel parallel-syncs %s 1\n", MasterName)
		for _, r := range rs.Replicas {
			fmt.Fprintf(&conf, "sentinel known-replica %s 127.0.0.1 %d\n", MasterName, r.Port())
		}
		for j := range k {
			if j != i {
				fmt.Fprintf(&conf, "sentinel known-sentinel %s 127.0.0.1 %d %s\n", MasterName, ports[j], ids[j])
			}
		}
		// Sentinel rewrites its config file, so it must be writable and its own.
		path := filepath.Join(tb.TempDir(), "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
			tb.Fatalf("redistest: writing %s: %v", path, err)
		}
		s.servers = append(s.servers, Start(tb, func(c *config) {
			c.conf = path
			c.port = ports[i]
			c.args = append(c.args, "--sentinel")
		}))
	}
	s.waitMaster(tb, rs.Master, rs.Replicas)
	return s
}

// Servers returns the Sentinel processes, for fault injection.
func (s *Sentinels) Servers() []*Server { return slices.Clone(s.servers) }

// Addrs returns the Sentinels' addresses, as "127.0.0.1:port".
func (s *Sentinels) Addrs() []string {
	addrs := make([]string, len(s.servers))
	for i, srv := range s.servers {
		addrs[i] = srv.Addr()
	}
	return addrs
}

// Quorum returns the number of Sentinels that must agree that the master is
// down before a failover starts.
func (s *Sentinels) Quorum() int { return s.quorum }

// FailoverOptions returns new options for [redis.NewFailoverClient] on the
// Sentinels: [MasterName], their addresses and ContextTimeoutEnabled. Tests
// may change them before creating a client.
func (s *Sentinels) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            MasterName,
		SentinelAddrs:         s.Addrs(),
		ContextTimeoutEnabled: true,
	}
}

// FailoverClient returns a client made by [redis.NewFailoverClient] with
// [Sentinels.FailoverOptions]: it talks to whichever server the Sentinels
// report as the master, and follows failovers. The client is closed by a
// cleanup registered with tb.
func (s *Sentinels) FailoverClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(s.FailoverOptions())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterAddr returns the master address that the first Sentinel reports
// (SENTINEL GET-MASTER-ADDR-BY-NAME). It fails the test if it does not
// answer.
func (s *Sentinels) MasterAddr(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	addr, err := masterAddr(ctx, s.servers[0])
	if err != nil {
		tb.Fatalf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %v", s.servers[0].Addr(), err)
	}
	return addr
}

// Master returns the server of the replica set that the first Sentinel
// reports as the master. It fails the test if that is none of them.
func (s *Sentinels) Master(tb testing.TB) *Server {
	tb.Helper()
	addr := s.MasterAddr(tb)
	for _, srv := range s.rs.Servers() {
		if srv.Addr() == addr {
			return srv
		}
	}
	tb.Fatalf("redistest: the Sentinels report master %s, which is not in the replica set", addr)
	return nil
}

// Failover forces a failover with SENTINEL FAILOVER on the first Sentinel
// (retried while it answers that no replica is ready or that a failover is
// in progress), and waits until every Sentinel reports a new master address
// and the server there reports role:master. It returns the new master.
//
// Sentinel turns the old master, if it still runs, into a replica of the new
// one only about 10 seconds later (until then it is a second master that
// the Sentinels no longer advertise); call [WaitInSync] to wait for that. Failover
// fails the test with tb.Fatalf if the failover does not complete within 15
// seconds.
func (s *Sentinels) Failover(tb testing.TB) *Server {
	tb.Helper()
	old := s.MasterAddr(tb)
	waitUntil(tb, "SENTINEL FAILOVER accepted", func(ctx context.Context) (bool, string) {
		err := s.servers[0].sentinel().Failover(ctx, MasterName).Err()
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return s.waitNewMaster(tb, old)
}

// WaitFailover waits until every Sentinel reports a master other than old
// (an address, as from [Sentinels.MasterAddr]) and the server there reports
// role:master, as after a failover the Sentinels started themselves because
// the master died, and returns the new master. It fails the test with
// tb.Fatalf if that does not happen within 15 seconds.
func (s *Sentinels) WaitFailover(tb testing.TB, old string) *Server {
	tb.Helper()
	return s.waitNewMaster(tb, old)
}

// waitNewMaster waits until every Sentinel reports the same master, other
// than old, and that server reports role:master, and returns it.
func (s *Sentinels) waitNewMaster(tb testing.TB, old string) *Server {
	tb.Helper()
	var next *Server
	waitUntil(tb, "the Sentinels agree on a new master", func(ctx context.Context) (bool, string) {
		var addr string
		for _, srv := range s.servers {
			a, err := masterAddr(ctx, srv)
			if err != nil {
				return false, fmt.Sprintf("sentinel %s: %v", srv.Addr(), err)
			}
			if a == old || (addr != "" && a != addr) {
				return false, fmt.Sprintf("sentinel %s reports master %s (old master %s)", srv.Addr(), a, old)
			}
			addr = a
		}
		next = nil
		for _, srv := range s.rs.Servers() {
			if srv.Addr() == addr {
				next = srv
			}
		}
		if next == nil {
			return false, fmt.Sprintf("new master %s is not in the replica set", addr)
		}
		info, err := infoReplication(ctx, next)
		if err != nil || info["role"] != "master" {
			return false, fmt.Sprintf("new master %s: role %q, err %v", addr, info["role"], err)
		}
		return true, ""
	})
	return next
}

// waitMaster waits until every Sentinel reports master as the master, with
// every one of replicas connected and the other Sentinels known.
func (s *Sentinels) waitMaster(tb testing.TB, master *Server, replicas []*Server) {
	tb.Helper()
	waitUntil(tb, "the Sentinels know the master, its replicas and each other", func(ctx context.Context) (bool, string) {
		for _, srv := range s.servers {
			sc := srv.sentinel()
			addr, err := masterAddr(ctx, srv)
			if err != nil || addr != master.Addr() {
				return false, fmt.Sprintf("sentinel %s: master %q, err %v", srv.Addr(), addr, err)
			}
			m, err := sc.Master(ctx, MasterName).Result()
			if err != nil {
				return false, fmt.Sprintf("sentinel %s: SENTINEL MASTER: %v", srv.Addr(), err)
			}
			if m["flags"] != "master" || m["num-other-sentinels"] != strconv.Itoa(len(s.servers)-1) {
				return false, fmt.Sprintf("sentinel %s: SENTINEL MASTER: %v", srv.Addr(), m)
			}
			rs, err := sc.Replicas(ctx, MasterName).Result()
			if err != nil {
				return false, fmt.Sprintf("sentinel %s: SENTINEL REPLICAS: %v", srv.Addr(), err)
			}
			ok := make(map[string]bool)
			for _, r := range rs {
				if r["flags"] == "slave" && r["master-link-status"] == "ok" {
					ok[net.JoinHostPort(r["ip"], r["port"])] = true
				}
			}
			for _, r := range replicas {
				if !ok[r.Addr()] {
					return false, fmt.Sprintf("sentinel %s: replica %s not connected: %v", srv.Addr(), r.Addr(), rs)
				}
			}
		}
		return true, ""
	})
}

// masterAddr asks the Sentinel srv for the master's address.
func masterAddr(ctx context.Context, srv *Server) (string, error) {
	hp, err := srv.sentinel().GetMasterAddrByName(ctx, MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("unexpected reply %v", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// sentinel returns the Sentinel client the harness uses to probe s, a
// Sentinel: no retries, short timeouts. It is closed when s is cleaned up.
func (s *Server) sentinel() *redis.SentinelClient {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.sentinelC == nil {
		s.sentinelC = redis.NewSentinelClient(&redis.Options{
			Addr:                  s.Addr(),
			MaxRetries:            -1,
			DialTimeout:           probeTimeout,
			ReadTimeout:           probeTimeout,
			WriteTimeout:          probeTimeout,
			ContextTimeoutEnabled: true,
			PoolSize:              2,
		})
	}
	return s.sentinelC
}

// SetFailoverTimeout sets the failover-timeout of the Sentinels' master
// (SENTINEL SET) to d, rounded down to whole milliseconds. Besides bounding
// a failover, failover-timeout is how long a Sentinel leaves alone a
// replica that replicates another address than the master's before it
// points it at the master itself (+fix-slave-config): a replica made by
// [StartReplicaVia] keeps replicating through its proxy only that long
// after the Sentinels started ([SentinelFailoverTimeout] by default). A
// Sentinel that lost a leader election waits twice failover-timeout before
// it tries again, so a long one suits a forced failover
// ([Sentinels.Failover]) best. It fails the test with tb.Fatalf if a
// Sentinel refuses.
func (s *Sentinels) SetFailoverTimeout(tb testing.TB, d time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.sentinel().Set(ctx, MasterName, "failover-timeout", strconv.FormatInt(d.Milliseconds(), 10)).Err(); err != nil {
			tb.Fatalf("redistest: SENTINEL SET %s failover-timeout %v on %s: %v", MasterName, d, srv.Addr(), err)
		}
	}
}
