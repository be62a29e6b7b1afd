-- acquire.lua: take or re-enter the reentrant lock N for owner O and issue a fencing token.
-- KEYS[1]  the lock hash N (field O -> hold count)
-- KEYS[2]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- ARGV[3]  the hold count O had before this acquisition as far as the caller knows, or -1 if unknown.
--          When O's count is already above it, this call is a retry of one whose reply was lost:
--          it answers without taking a second hold, with a fresh token.
-- ARGV[4]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- Returns {1, holdCount, token} when O now holds the lock,
-- or {0, pttl} when another owner holds it (pttl is -1 when the key has no expiry).
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data. The
-- lock's type is read once (a free lock needs nothing else read); the counter's is not read at all:
-- the token is issued before the lock is written, and its first command fails on a counter of another
-- type before anything is written (issueToken).
local found = redis.call('type', KEYS[1]).ok
if found == 'none' then
    local token = issueToken(KEYS[2], ARGV[4])
    redis.call('hset', KEYS[1], ARGV[2], '1')
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1, token}
end
if found ~= 'hash' then
    return typeRefusal(1, found, 'hash')
end
-- One read gives the owner's count and tells a read-write lock (field mode) apart (kindMismatch).
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if not state[2] then
    return {0, redis.call('pttl', KEYS[1])}
end
if state[1] then
    return kindRefusal(ARGV[2])
end
local current = tonumber(state[2])
local expected = tonumber(ARGV[3])
local token = issueToken(KEYS[2], ARGV[4])
if expected >= 0 and current > expected then
    -- A fresh token, never the counter's value: the hold found may also be a dead one of the owner's,
    -- lost to the caller (its Done closed) while Redis kept it (a renewal that took effect although
    -- its answer was lost), which the caller failed to clear; answering the counter gave it that
    -- hold's token a second time. The token of a lost reply was never seen, so a fresh one costs
    -- nothing but a gap.
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, current, token}
end
redis.call('hincrby', KEYS[1], ARGV[2], '1')
redis.call('pexpire', KEYS[1], ARGV[1])
return {1, current + 1, token}
