package redisops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RunID returns the run id of the Redis server behind the client (INFO server's run_id), which a
// server draws anew each time it starts: a changed run id means the server restarted, and without
// persistence forgot every key. It returns "" and no error when there is no one server to ask (a
// Redis Cluster client, which would ask any of its nodes) or the server does not report a run id
// (a server that refuses INFO server, such as miniredis).
func (o *Ops) RunID(ctx context.Context) (string, error) {
	info, ok := o.client.(interface {
		Info(ctx context.Context, section ...string) *redis.StringCmd
	})
	if _, cluster := o.client.(*redis.ClusterClient); cluster || !ok {
		return "", nil
	}
	text, err := info.Info(ctx, "server").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return "", nil // an answer from the server: it does not report a run id
		}
		return "", fmt.Errorf("lockwarden: INFO server: %w", err)
	}
	for line := range strings.Lines(text) {
		if id, found := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); found {
			return id, nil
		}
	}
	return "", nil
}
