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
-- of the application) is refused before anything changes: the script touches only its own data.
local refused = wrongType({[1] = 'hash', [2] = 'string'}) or kindMismatch(ARGV[2], false)
if refused then
    return refused
end
local expected = tonumber(ARGV[3])
local current = redis.call('hget', KEYS[1], ARGV[2])
if current then
    current = tonumber(current)
    if expected >= 0 and current > expected then
        redis.call('pexpire', KEYS[1], ARGV[1])
        -- A fresh token, never the counter's value: the hold found may also be a dead one of the
        -- owner's, lost to the caller (its Done closed) while Redis kept it (a renewal that took
        -- effect although its answer was lost), which the caller failed to clear; answering the
        -- counter gave it that hold's token a second time. The token of a lost reply was never seen,
        -- so a fresh one costs nothing but a gap.
        return {1, current, issueToken(KEYS[2], tonumber(ARGV[4]))}
    end
elseif redis.call('exists', KEYS[1]) == 1 then
    return {0, redis.call('pttl', KEYS[1])}
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return {1, count, issueToken(KEYS[2], tonumber(ARGV[4]))}
