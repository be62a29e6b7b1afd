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
// one field per hold of its owners ([HeldField]), and an expiry that the coordinator keeps renewing
// while it runs.
func ProcessKey(id string) string { return processPrefix + id }

// processFields are the fields of a registration other than its holds.
var processFields = []string{"host", "pid", "program", "started", "version"}

// heldPrefix starts the fields of a registration that record its holds (see [HeldField]).
const heldPrefix = "held:"

// HeldField returns the field of a registration that records since when owner holds name: held:
// followed by the length of owner, a colon, owner and name. Its value is the Unix milliseconds of the
// first grant of the hold.
func HeldField(owner, name string) string {
	return heldPrefix + strconv.Itoa(len(owner)) + ":" + owner + name
}

// RegisterProcess stores p under [ProcessKey] for ttl, with the holds of its owners (see [HeldField];
// nil or empty: none), replacing what the key held, in one transaction: a coordinator calls it again
// before ttl runs out, for as long as it runs, and updates its holds in between with [UpdateHolds].
func RegisterProcess(ctx context.Context, client redis.Cmdable, p Process, ttl time.Duration, holds map[string]time.Time) error {
	key := ProcessKey(p.ID)
	_, err := client.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.Del(ctx, key)
		values := []any{"host", p.Host, "pid", p.PID, "program", p.Program, "started", p.Started.UnixMilli(), "version", p.Version}
		for field, since := range holds {
			values = append(values, field, since.UnixMilli())
		}
		tx.HSet(ctx, key, values...)
		tx.PExpire(ctx, key, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("lockwarden: register process %s: %w", p.ID, err)
	}
	return nil
}

// UpdateHolds records the holds added (field to since when) and removes those removed in the
// registration of the coordinator id, if it exists (a registration that expired is written whole again
// by the next [RegisterProcess]).
func UpdateHolds(ctx context.Context, client redis.Cmdable, id string, added map[string]time.Time, removed []string) error {
	if len(added) == 0 && len(removed) == 0 {
		return nil
	}
	key := ProcessKey(id)
	args := []any{len(removed)}
	for _, f := range removed {
		args = append(args, f)
	}
	for f, since := range added {
		args = append(args, f, since.UnixMilli())
	}
	if err := updateHoldsScript.Run(ctx, client, []string{key}, args...).Err(); err != nil && err != redis.Nil {
		return fmt.Errorf("lockwarden: update the holds of process %s: %w", id, err)
	}
	return nil
}

// updateHoldsScript: KEYS[1] a registration; ARGV[1] the number n of fields to remove, ARGV[2..n+1]
// those fields, then field, value pairs to set. Nothing happens when the registration is gone.
var updateHoldsScript = redis.NewScript(`
if redis.call('exists', KEYS[1]) == 0 then return 0 end
local n = tonumber(ARGV[1])
for i = 2, n + 1 do redis.call('hdel', KEYS[1], ARGV[i]) end
for i = n + 2, #ARGV, 2 do redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1`)

// UnregisterProcess deletes the registration of the coordinator id.
func UnregisterProcess(ctx context.Context, client redis.Cmdable, id string) error {
	if err := client.Del(ctx, ProcessKey(id)).Err(); err != nil {
		return fmt.Errorf("lockwarden: unregister process %s: %w", id, err)
	}
	return nil
}

// HoldQuery asks since when Owner holds Name, in the registration of the coordinator ID.
type HoldQuery struct {
	// ID is the coordinator id, Owner the owner id and Name the lock name.
	ID, Owner, Name string
}

// LookupProcesses returns the registered processes of the coordinator ids, and since when the holds
// asked about were granted (zero when the registration does not record them: a hold younger than
// about a second, or not a lockwarden one), in one pipeline; an id with no registration (not a
// lockwarden coordinator, or one that stopped) is missing from the map.
func LookupProcesses(ctx context.Context, client redis.Cmdable, ids []string, holds ...HoldQuery) (map[string]Process, []time.Time, error) {
	found := make(map[string]Process, len(ids))
	since := make([]time.Time, len(holds))
	if len(ids) == 0 && len(holds) == 0 {
		return found, since, nil
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	heldCmds := make([]*redis.SliceCmd, len(holds))
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, ProcessKey(id), processFields...)
		}
		for i, h := range holds {
			heldCmds[i] = p.HMGet(ctx, ProcessKey(h.ID), HeldField(h.Owner, h.Name))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, nil, fmt.Errorf("lockwarden: look up processes: %w", err)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	for i, id := range ids {
		vals, err := cmds[i].Result()
		if err != nil || len(vals) != len(processFields) || vals[0] == nil {
			continue
		}
		p := Process{ID: id, Host: str(vals[0]), Program: str(vals[2]), Version: str(vals[4])}
		p.PID, _ = strconv.Atoi(str(vals[1]))
		if ms, err := strconv.ParseInt(str(vals[3]), 10, 64); err == nil {
			p.Started = time.UnixMilli(ms)
		}
		found[id] = p
	}
	for i := range holds {
		vals, err := heldCmds[i].Result()
		if err != nil || len(vals) != 1 {
			continue
		}
		if ms, err := strconv.ParseInt(str(vals[0]), 10, 64); err == nil {
			since[i] = time.UnixMilli(ms)
		}
	}
	return found, since, nil
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
