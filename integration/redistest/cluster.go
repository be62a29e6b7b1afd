package redistest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// ClusterNodeTimeout is the cluster-node-timeout of the nodes that
// [StartCluster] starts, in milliseconds.
const ClusterNodeTimeout = 2000

// A Cluster is a Redis Cluster of masters without replicas, created by
// [StartCluster]. Its methods may be called from any goroutine, except
// those that take a testing.TB, which follow the rules of [Start].
type Cluster struct {
	nodes []*Server
	// first[i] is the first slot of nodes[i]; its last is first[i+1]-1.
	first []int
}

// StartCluster starts n redis-server processes with
//
//	--cluster-enabled yes --cluster-config-file <tempdir>/nodes-<port>.conf --cluster-node-timeout 2000
//
// (plus any options, which apply to every node), splits the 16384 slots
// into n contiguous ranges, node i getting the i-th (CLUSTER ADDSLOTSRANGE),
// gives each node its own config epoch, joins them with CLUSTER MEET, and
// waits until every node reports cluster_state:ok with n known nodes and
// every node's CLUSTER SLOTS gives the same, complete map. That takes
// about 2 seconds, most of it Redis' own delay before a fresh master
// declares the cluster ok.
//
// Processes are stopped by cleanups registered with tb. StartCluster fails
// the test with tb.Fatalf if n < 1, a node does not start, a command is
// refused, or the cluster is not ok within 15 seconds.
func StartCluster(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("redistest: StartCluster: need at least one node, got %d", n)
	}
	dir := tb.TempDir()
	c := &Cluster{}
	for i := range n {
		nodeOpts := append(append([]Option(nil), opts...), func(cf *config) {
			cf.args = append(cf.args, "--cluster-enabled", "yes",
				"--cluster-node-timeout", strconv.Itoa(ClusterNodeTimeout))
			cf.portArgs = func(port int) []string {
				return []string{"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port))}
			}
		})
		c.nodes = append(c.nodes, Start(tb, nodeOpts...))
		c.first = append(c.first, i*ClusterSlots/n)
	}
	c.first = append(c.first, ClusterSlots)

	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	for i, node := range c.nodes {
		a := node.admin()
		if err := a.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			tb.Fatalf("redistest: CLUSTER SET-CONFIG-EPOCH on %s: %v", node.Addr(), err)
		}
		if err := a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", c.first[i], c.first[i+1]-1).Err(); err != nil {
			tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", node.Addr(), err)
		}
	}
	for _, node := range c.nodes[1:] {
		if err := c.nodes[0].admin().ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(node.Port())).Err(); err != nil {
			tb.Fatalf("redistest: CLUSTER MEET %s: %v", node.Addr(), err)
		}
	}
	c.waitOK(tb)
	return c
}

// waitOK waits until every node is ok and agrees on the slot map.
func (c *Cluster) waitOK(tb testing.TB) {
	tb.Helper()
	want := make([]string, len(c.nodes))
	for i, node := range c.nodes {
		want[i] = fmt.Sprintf("%d-%d@%s", c.first[i], c.first[i+1]-1, node.Addr())
	}
	waitUntil(tb, "cluster_state:ok on every node", func(ctx context.Context) (bool, string) {
		for _, node := range c.nodes {
			text, err := node.admin().ClusterInfo(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("node %s: CLUSTER INFO: %v", node.Addr(), err)
			}
			info := parseInfo(text)
			if info["cluster_state"] != "ok" || info["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) ||
				info["cluster_slots_ok"] != strconv.Itoa(ClusterSlots) {
				return false, fmt.Sprintf("node %s: CLUSTER INFO: %v", node.Addr(), info)
			}
			shards, err := node.admin().ClusterShards(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("node %s: CLUSTER SHARDS: %v", node.Addr(), err)
			}
			var got []string
			for _, sh := range shards {
				master := slices.IndexFunc(sh.Nodes, func(n redis.Node) bool { return n.Role == "master" })
				for _, r := range sh.Slots {
					if master < 0 {
						return false, fmt.Sprintf("node %s: slots %d-%d have no master", node.Addr(), r.Start, r.End)
					}
					m := sh.Nodes[master]
					got = append(got, fmt.Sprintf("%d-%d@%s:%d", r.Start, r.End, m.IP, m.Port))
				}
			}
			slices.Sort(got)
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(got, w) {
				return false, fmt.Sprintf("node %s: CLUSTER SHARDS %v, want %v", node.Addr(), got, w)
			}
		}
		return true, ""
	})
}

// Nodes returns the cluster's nodes, for fault injection; node i serves the
// i-th range of slots.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Addrs returns the nodes' addresses, as "127.0.0.1:port".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// NodeForSlot returns the node that serves slot, which must be in
// [0, 16384).
func (c *Cluster) NodeForSlot(slot int) *Server {
	for i := range c.nodes {
		if slot < c.first[i+1] {
			return c.nodes[i]
		}
	}
	panic(fmt.Sprintf("redistest: slot %d out of range", slot))
}

// KeySlot returns the hash slot of key, as CLUSTER KEYSLOT computes it on
// the first node. It fails the test if the node does not answer.
func (c *Cluster) KeySlot(tb testing.TB, key string) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	slot, err := c.nodes[0].admin().ClusterKeySlot(ctx, key).Result()
	if err != nil {
		tb.Fatalf("redistest: CLUSTER KEYSLOT %q: %v", key, err)
	}
	return int(slot)
}

// NodeForKey returns the node that serves key's slot.
func (c *Cluster) NodeForKey(tb testing.TB, key string) *Server {
	tb.Helper()
	return c.NodeForSlot(c.KeySlot(tb, key))
}

// ClusterOptions returns new options for [redis.NewClusterClient] on the
// cluster: the nodes' addresses and ContextTimeoutEnabled. Tests may change
// them before creating a client.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true}
}

// Client returns a new cluster client made with [Cluster.ClusterOptions].
// It is closed by a cleanup registered with tb.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(c.ClusterOptions())
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// String describes the slot ranges and their nodes.
func (c *Cluster) String() string {
	var b strings.Builder
	for i, n := range c.nodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d-%d@%s", c.first[i], c.first[i+1]-1, n.Addr())
	}
	return b.String()
}
