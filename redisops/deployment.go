package redisops

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrUnsupportedClient is returned for a Redis client whose deployment lockwarden cannot serve
// correctly: a *redis.Ring, or a type of client other than go-redis' *redis.Client and
// *redis.ClusterClient. A Ring spreads keys over independent servers by consistent hashing and moves a
// server's keys to the others while it fails its health checks: a lock held on a server that stops
// answering for a moment would be taken again on another one, by a second owner. Its pub/sub also
// needs a channel to pick a server before it can subscribe. Use one client per server instead, with
// RedLock or MultiLock across them, or a Redis Cluster.
var ErrUnsupportedClient = errors.New("lockwarden: unsupported redis client")

// Deployment is the kind of Redis deployment behind a client. It is decided once, from the client's
// type, by [DeploymentOf], and decides how lock notices travel (PUBLISH or SPUBLISH), how the pub/sub
// bridge subscribes, and whether it watches for a failover.
type Deployment uint8

const (
	// DeploymentSingle is one server (or a proxy in front of one), through a *redis.Client.
	DeploymentSingle Deployment = iota + 1
	// DeploymentFailover is a master found through Sentinel, through the *redis.Client that
	// redis.NewFailoverClient (or redis.NewUniversalClient with a MasterName) returns: commands follow
	// the master after a failover, but an open pub/sub connection does not.
	DeploymentFailover
	// DeploymentCluster is a Redis Cluster, through a *redis.ClusterClient (also the one
	// redis.NewUniversalClient returns for several addresses): notices go over sharded pub/sub.
	DeploymentCluster
)

// String names the deployment.
func (d Deployment) String() string {
	switch d {
	case DeploymentSingle:
		return "single"
	case DeploymentFailover:
		return "failover"
	case DeploymentCluster:
		return "cluster"
	default:
		return fmt.Sprintf("Deployment(%d)", uint8(d))
	}
}

// Sharded reports whether lock notices go over sharded pub/sub (SPUBLISH, SSUBSCRIBE): on Redis
// Cluster a shard channel lives on the master of its slot, which is the lock's slot, so a notice stays
// on that master instead of being broadcast to every node. Sharded pub/sub needs Redis 7.0 or later.
func (d Deployment) Sharded() bool { return d == DeploymentCluster }

// failoverAddr is the Addr that go-redis gives the options of a Sentinel failover client; it is the
// only mark that tells such a client from one for a single server, since both are a *redis.Client.
const failoverAddr = "FailoverClient"

// DeploymentOf returns the deployment behind client, from its type: a *redis.Client is a single server,
// or a Sentinel failover client when go-redis made it with NewFailoverClient; a *redis.ClusterClient is
// a Cluster. A *redis.Ring, any other type and a nil client return [ErrUnsupportedClient].
func DeploymentOf(client any) (Deployment, error) {
	switch c := client.(type) {
	case *redis.Client:
		if c == nil {
			break
		}
		if c.Options().Addr == failoverAddr {
			return DeploymentFailover, nil
		}
		return DeploymentSingle, nil
	case *redis.ClusterClient:
		if c == nil {
			break
		}
		return DeploymentCluster, nil
	case *redis.Ring:
		return 0, fmt.Errorf("%w: *redis.Ring (a lock must live on one server; use one client per server, with RedLock or MultiLock across them)",
			ErrUnsupportedClient)
	}
	return 0, fmt.Errorf("%w: %T (use *redis.Client, a Sentinel failover client or *redis.ClusterClient)", ErrUnsupportedClient, client)
}
