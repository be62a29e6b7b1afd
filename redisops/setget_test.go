package redisops_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// beforeSetGet, put ahead of a script, makes it run as on a server older than Redis 6.2, which refuses
// SET with the GET option ("ERR syntax error"); every other call goes to the server.
const beforeSetGet = `
local server = redis
local redis = setmetatable({call = function(...)
    local n = select('#', ...)
    if string.lower(select(1, ...)) == 'set' and string.lower(tostring(select(n, ...))) == 'get' then
        error({err = 'ERR syntax error'})
    end
    return server.call(...)
end}, {__index = server})
`

// TestScriptsWithoutSetGet: on a server that refuses SET ... GET (before Redis 6.2), which the reentrant
// lock's scripts do not use, an acquisition issues fencing tokens from the expiring counter, the last
// release stores its answer in the latch and a retry reads it, and a release that hands the lock off
// issues the next owner's token; a latch key of another type is still refused before anything changes.
func TestScriptsWithoutSetGet(t *testing.T) {
	ops, c := setupExpiringTokens(t)
	ctx := t.Context()
	acquire := redis.NewScript(beforeSetGet + redisops.AcquireSource)
	release := redis.NewScript(beforeSetGet + redisops.ReleaseSource)
	name := "setget:old"
	n := redisops.NamesOf(name)
	lease := int64(longLease / time.Millisecond)
	take := func(owner string) []int64 {
		t.Helper()
		vals, err := acquire.Run(ctx, c, []string{name, n.Token}, lease, owner, 0, redisops.TokenArg(ops)).Int64Slice()
		if err != nil {
			t.Fatalf("acquire by %s: %v", owner, err)
		}
		return vals
	}
	give := func(id, owner, next string, held int64) ([]int64, error) {
		nextLease := int64(0)
		if next != "" {
			nextLease = lease
		}
		latch, seq := redisops.UnlockLatchKey(name, id), ""
		if held >= 0 {
			latch, seq = redisops.UnlockLatchKey(name, owner), strings.TrimPrefix(id, "r")
		}
		return release.Run(ctx, c, []string{name, n.Channel, latch, n.Token},
			lease, owner, redisops.UnlockMessage, int64(redisops.DefaultLatchExpiry/time.Millisecond), "publish",
			next, nextLease, "0", redisops.TokenArg(ops), held, seq).Int64Slice()
	}

	first := take("a")
	if len(first) != 3 || first[0] != 1 || first[2] <= 0 {
		t.Fatalf("first acquisition: got %v, want {1, 1, token}", first)
	}
	if ttl, err := c.PTTL(ctx, n.Token).Result(); err != nil || ttl <= 0 {
		t.Errorf("PTTL of the token counter: got %v, %v, want an expiry", ttl, err)
	}
	handed, err := give("r1", "a", "b", 1)
	if err != nil || len(handed) != 2 || handed[0] != 0 || handed[1] <= first[2] {
		t.Fatalf("release handing off to b: got %v, %v, want {0, token above %d}", handed, err, first[2])
	}
	last, err := give("r2", "b", "", 1)
	if err != nil || len(last) != 2 || last[0] != 0 || last[1] != 0 {
		t.Fatalf("last release of b: got %v, %v, want {0, 0}", last, err)
	}
	if n, err := c.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of the released lock: got %d, %v, want 0", n, err)
	}
	retry, err := give("r2", "b", "", 1)
	if err != nil || len(retry) != 2 || retry[0] != 0 || retry[1] != 0 {
		t.Errorf("retry of the last release: got %v, %v, want {0, 0} from the latch", retry, err)
	}
	if again := take("c"); len(again) != 3 || again[2] <= handed[1] {
		t.Errorf("acquisition after the handoff: got %v, want a token above %d", again, handed[1])
	}

	if err := c.HSet(ctx, redisops.UnlockLatchKey(name, "c"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = give("r3", "c", "", 1)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("last release with a latch of another type: got %v, want WRONGTYPE", err)
	}
	if held, err := c.HGet(ctx, name, "c").Result(); err != nil || held != "1" {
		t.Errorf("c's hold after the refused release: got %q, %v, want 1 (unchanged)", held, err)
	}
}
