-- acquire.lua: take or re-enter the reentrant lock N for owner O and issue a fencing token.
-- KEYS[1]  the lock hash N (field O -> hold count)
-- KEYS[2]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- ARGV[3]  the hold count O had before this acquisition as far as the caller knows, or -1 if unknown.
--          When O's count is already above it, this call is a retry of one whose reply was lost:
--          it answers without taking a second hold, with a fresh token.
-- ARGV[4]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken below)
-- Returns {1, holdCount, token} when O now holds the lock,
-- or {0, pttl} when another owner holds it (pttl is -1 when the key has no expiry).
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
for i, want in pairs({[1] = 'hash', [2] = 'string'}) do
    local got = redis.call('type', KEYS[i]).ok
    if got ~= 'none' and got ~= want then
        return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. got .. ', not a ' .. want)
    end
end
-- Issues a fencing token on the counter KEYS[2] (see token.go). With a token expiry of 0 the counter is
-- INCRed and kept forever (Redisson's RFencedLock). Otherwise the token is the larger of the counter
-- plus one and the server's clock in microseconds, and the counter keeps it until the clock has passed
-- it by the expiry, so that a name leaves no key behind, and a token issued after the counter expired
-- (from the clock) is still above every earlier one.
local function issueToken(expiry)
    if expiry == 0 then
        local token = redis.call('incr', KEYS[2])
        redis.call('persist', KEYS[2])
        return token
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local token = math.max(tonumber(redis.call('get', KEYS[2]) or '0') + 1, now)
    local keep = expiry + math.ceil((token - now) / 1000)
    redis.call('set', KEYS[2], string.format('%d', token), 'px', string.format('%d', keep))
    return token
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
        return {1, current, issueToken(tonumber(ARGV[4]))}
    end
elseif redis.call('exists', KEYS[1]) == 1 then
    return {0, redis.call('pttl', KEYS[1])}
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return {1, count, issueToken(tonumber(ARGV[4]))}
