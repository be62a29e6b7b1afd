-- release_fenced.lua: release one hold of the reentrant lock N by owner O, with no handoff, made
-- retry-safe by the lock's fencing-token counter rather than by an unlock latch: the common release of
-- a hold whose token its acquisition issued on a counter that expires (issueToken in lib.lua) reads
-- and writes nothing but the lock, its channel and the counter. release.lua does every other release.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- KEYS[3]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds to keep when holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  O's hold count before this release as the caller knows it (at least 1)
-- ARGV[4]  the counter's value right after O's latest acquisition: that acquisition's token plus one
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- Returns remaining: O's hold count left (0 = released); -1 when O's hold is gone with the counter
-- unchanged (it was lost, see below); -3 when this call cannot tell a first run from a copy of one
-- that ran (the counter moved since O's latest acquisition, or O's count is neither the caller's nor
-- one below it), and changes nothing: the caller sends release.lua under the same sequence number.
--
-- Why a copy of this call never releases twice. go-redis sends a call again after a connection error,
-- and a copy may also arrive late, after the caller has gone on (a TCP segment of a connection that
-- go-redis gave up). Every acquisition moves the counter: issueToken raises it by two, or sets it from
-- the server's clock in microseconds when it is gone, far above any value a counter of the name held
-- before (as long as the clock does not step back by more than the counter's expiry, the condition
-- under which tokens increase at all: see Ops.SetTokenExpiry); raiseTo and raise_token.lua only raise
-- it. So the counter does not come back to a value it left. A hold is released only while the counter
-- still has the value of O's latest acquisition and O's count is the caller's: a release that leaves
-- holds lowers the count, which only an acquisition, moving the counter, raises again; the release of
-- the last hold raises the counter by one as it deletes the lock. So a copy that finds the count one
-- below the caller's, or the lock gone and the counter one above, is a copy of a release that ran,
-- and answers what it did. With the counter unchanged and O's hold gone, the hold was lost (it expired
-- or was deleted) with no acquisition since, and no copy of this release ran: O holds nothing.
--
-- O's latch. The caller sends this script only while O has no latch of a release through release.lua
-- (none answered, or failed, less than the latch's expiry ago; a failed call of this script sent
-- again is the exception, and changes nothing when it found the counter moved before): while one may
-- exist, each release of O goes through release.lua, so that a late copy of an older release keeps
-- finding a higher number there for as long as O goes on releasing. A retry of this call that finds
-- the counter moved is sent as release.lua, which finds no answer of its own in the latch and tells a
-- run of this one by O's count.
-- A key of another type than the script keeps there is refused by its first command (GET, HMGET)
-- before anything changes.
local counter = redis.call('get', KEYS[3])
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if state[2] and state[1] then
    return kindRefusal(ARGV[2])
end
local held = tonumber(ARGV[3])
local count = tonumber(state[2] or '0')
local remaining = -3
if counter == ARGV[4] then
    if count == held then
        if held > 1 then
            redis.call('hincrby', KEYS[1], ARGV[2], '-1')
            redis.call('pexpire', KEYS[1], ARGV[1])
            remaining = held - 1
        else
            redis.call('del', KEYS[1])
            redis.call(ARGV[5], KEYS[2], '0') -- UnlockMessage
            redis.call('incr', KEYS[3])
            remaining = 0
        end
    elseif count == 0 then
        remaining = -1
    elseif count == held - 1 then
        remaining = count
    end
elseif count == 0 and held == 1 and counter and tonumber(counter) == tonumber(ARGV[4]) + 1 then
    remaining = 0
end
return remaining
