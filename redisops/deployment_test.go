package redisops_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

func TestDeploymentOf(t *testing.T) {
	t.Parallel()
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	universalOne := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}})
	universalSentinel := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "m", Addrs: []string{"127.0.0.1:1"}})
	universalMany := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() {
		for _, c := range []redis.UniversalClient{single, failover, universalOne, universalSentinel, universalMany, cluster, ring} {
			_ = c.Close()
		}
	})
	for _, tc := range []struct {
		name   string
		client any
		want   redisops.Deployment
	}{
		{"single", single, redisops.DeploymentSingle},
		{"failover", failover, redisops.DeploymentFailover},
		{"universal, one address", universalOne, redisops.DeploymentSingle},
		{"universal, master name", universalSentinel, redisops.DeploymentFailover},
		{"universal, several addresses", universalMany, redisops.DeploymentCluster},
		{"cluster", cluster, redisops.DeploymentCluster},
		{"ring", ring, 0},
		{"nil", nil, 0},
		{"nil *redis.Client", (*redis.Client)(nil), 0},
		{"nil *redis.ClusterClient", (*redis.ClusterClient)(nil), 0},
		{"another type", struct{ redis.UniversalClient }{single}, 0},
	} {
		got, err := redisops.DeploymentOf(tc.client)
		if tc.want == 0 {
			if !errors.Is(err, redisops.ErrUnsupportedClient) {
				t.Errorf("DeploymentOf(%s) = %v, %v; want ErrUnsupportedClient", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DeploymentOf(%s) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
		if sharded := redisops.NewFor(single, got).ShardedPubSub(); sharded != (tc.want == redisops.DeploymentCluster) {
			t.Errorf("NewFor(%v).ShardedPubSub() = %v", got, sharded)
		}
	}
}
