package redisops

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Process is a lockwarden coordinator as it registers itself in Redis, so that the owner ids it
// creates (<coordinator id>:<n>) can be told apart by operators: which host and process holds a lock.
type Process struct {
	// ID is the coordinator's id, the first part of its owner ids.
	ID string `json:"id"`
	// Host is the host name of the machine it runs on (os.Hostname).
	Host string `json:"host"`
	// PID is its process id on that host.
	PID int `json:"pid"`
	// Program is the base name of the program's executable.
	Program string `json:"program"`
	// Started is when the coordinator was created.
	Started time.Time `json:"started"`
	// Version is the lockwarden version the process runs.
	Version string `json:"version"`
}

// processPrefix starts the keys of the process registry.
const processPrefix = "lockwarden_process:"

// ProcessKey returns the key under which the coordinator id registers itself: a HASH
// lockwarden_process:<id> with the fields host, pid, program, started (Unix milliseconds) and version,
// and an expiry that the coordinator keeps renewing while it runs.
func ProcessKey(id string) string { return processPrefix + id }

// RegisterProcess stores p under [ProcessKey] for ttl, in one transaction (HSET and PEXPIRE): a
// coordinator calls it again before ttl runs out, for as long as it runs.
func RegisterProcess(ctx context.Context, client redis.Cmdable, p Process, ttl time.Duration) error {
	key := ProcessKey(p.ID)
	_, err := client.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.HSet(ctx, key, "host", p.Host, "pid", p.PID, "program", p.Program,
			"started", p.Started.UnixMilli(), "version", p.Version)
		tx.PExpire(ctx, key, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("lockwarden: register process %s: %w", p.ID, err)
	}
	return nil
}

// UnregisterProcess deletes the registration of the coordinator id.
func UnregisterProcess(ctx context.Context, client redis.Cmdable, id string) error {
	if err := client.Del(ctx, ProcessKey(id)).Err(); err != nil {
		return fmt.Errorf("lockwarden: unregister process %s: %w", id, err)
	}
	return nil
}

// LookupProcesses returns the registered processes of the coordinator ids, in one pipeline; an id with
// no registration (not a lockwarden coordinator, or one that stopped) is missing from the map.
func LookupProcesses(ctx context.Context, client redis.Cmdable, ids []string) (map[string]Process, error) {
	found := make(map[string]Process, len(ids))
	if len(ids) == 0 {
		return found, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, ProcessKey(id))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("lockwarden: look up processes: %w", err)
	}
	for i, id := range ids {
		fields, err := cmds[i].Result()
		if err != nil || len(fields) == 0 {
			continue
		}
		p := Process{ID: id, Host: fields["host"], Program: fields["program"], Version: fields["version"]}
		p.PID, _ = strconv.Atoi(fields["pid"])
		if ms, err := strconv.ParseInt(fields["started"], 10, 64); err == nil {
			p.Started = time.UnixMilli(ms)
		}
		found[id] = p
	}
	return found, nil
}

// OwnerClientID returns the client id in the owner id: the part before its last colon, which is the
// coordinator id for lockwarden's owner ids (<coordinator id>:<n>) and the client's UUID for
// Redisson's (<UUID>:<thread id>). An owner id with no colon is its own client id.
func OwnerClientID(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i > 0 {
		return owner[:i]
	}
	return owner
}
