-- release.lua: retry-safe release of one hold of the reentrant lock N by owner O, with an optional
-- local handoff to a next owner in the same call.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- KEYS[3]  the unlock latch redisson_unlock_latch:{N}:<request id>
-- KEYS[4]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds to keep when holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  message published when the lock becomes free ("0")
-- ARGV[4]  latch expiry in milliseconds
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[6]  next owner to hand the lock to when it becomes free, or "" for none
-- ARGV[7]  lease in milliseconds for the next owner
-- ARGV[8]  "1" when the caller's budget of handoffs in a row is spent: then the lock is handed off
--          only if no other client listens on the channel (the caller's own subscription is the one
--          allowed), so that waiters in other processes get their turn
-- ARGV[9]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- Returns {remaining, token}: remaining is O's hold count left (0 = released), or -1 when O holds
-- nothing. token is the next owner's fencing token when the lock was handed off, else 0.
-- A retried call with the same request id returns the stored answer instead of releasing twice.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local wrong = wrongType({[1] = 'hash', [3] = 'string', [4] = 'string'})
if wrong then
    return wrong
end
local latched = redis.call('get', KEYS[3])
if latched then
    local sep = string.find(latched, ':', 1, true)
    return {tonumber(string.sub(latched, 1, sep - 1)), tonumber(string.sub(latched, sep + 1))}
end
local mismatch = kindMismatch(ARGV[2], false)
if mismatch then
    return mismatch
end
local held = redis.call('hget', KEYS[1], ARGV[2])
if not held then
    return {-1, 0}
end
local remaining = tonumber(held) - 1
local token = 0
if remaining > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    redis.call('pexpire', KEYS[1], ARGV[1])
elseif ARGV[6] ~= '' and (ARGV[8] ~= '1' or tonumber(redis.call('pubsub',
        ARGV[5] == 'spublish' and 'shardnumsub' or 'numsub', KEYS[2])[2]) <= 1) then
    redis.call('del', KEYS[1])
    redis.call('hset', KEYS[1], ARGV[6], 1)
    redis.call('pexpire', KEYS[1], ARGV[7])
    token = issueToken(KEYS[4], tonumber(ARGV[9]))
else
    redis.call('del', KEYS[1])
    redis.call(ARGV[5], KEYS[2], ARGV[3])
end
redis.call('set', KEYS[3], string.format('%d:%d', remaining, token), 'px', ARGV[4])
return {remaining, token}
