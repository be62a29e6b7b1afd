-- release_fenced.lua: release one hold of the reentrant lock N by owner O, with no handoff, made
-- retry-safe by the lock's fencing-token counter rather than by an unlock latch: nothing is read or
-- written but the lock, its channel and the counter. The release of a hold whose token its acquisition
-- issued on a counter that expires (issueToken in lib.lua); release.lua does every other release.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- KEYS[3]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds to keep when holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  O's hold count before this release as the caller knows it (at least 1)
-- ARGV[4]  the counter's value right after O's latest acquisition: that acquisition's token plus one
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- Returns remaining: O's hold count left (0 = released); -1 when O holds nothing; -3 when the counter
-- has moved since O's latest acquisition, or O's count is neither the caller's nor one below it: then
-- this call cannot tell a first run from a copy of one that ran, and changes nothing (the caller
-- sends release.lua).
--
-- Why a copy of this call never releases twice. go-redis sends a call again after a connection error,
-- and a copy may also arrive late, after the caller has gone on (a TCP segment of a connection that
-- go-redis gave up). Every acquisition moves the counter (issueToken raises it by two, or sets it from
-- the clock, far above; raiseTo only raises it), and the counter never comes back to a value it left.
-- A hold is released only while the counter still has the value of O's latest acquisition and O's
-- count is the caller's: a release that leaves holds lowers the count, which only an acquisition,
-- moving the counter, raises again; the release of the last hold raises the counter by one as it
-- deletes the lock. So a copy that finds the count one below the caller's, or the lock gone and the
-- counter one above, is a copy of a release that ran, and answers it. A lock gone with the counter
-- unchanged was lost (it expired or was deleted) with no acquisition since: O holds nothing.
-- A key of another type than the script keeps there is refused by its first command (GET, HMGET)
-- before anything changes.
local counter = redis.call('get', KEYS[3])
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if state[2] and state[1] then
    return kindRefusal(ARGV[2])
end
local held = tonumber(ARGV[3])
local count = tonumber(state[2] or '0')
if counter == ARGV[4] then
    if count == held then
        if held > 1 then
            redis.call('hincrby', KEYS[1], ARGV[2], '-1')
            redis.call('pexpire', KEYS[1], ARGV[1])
            return held - 1
        end
        redis.call('del', KEYS[1])
        redis.call(ARGV[5], KEYS[2], '0')
        redis.call('incr', KEYS[3])
        return 0
    end
    if count == 0 then
        return -1
    end
    if count == held - 1 then
        return count
    end
    return -3
end
if count == 0 and held == 1 and counter and tonumber(counter) == tonumber(ARGV[4]) + 1 then
    return 0
end
return -3
