-- acquire.lua: take or re-enter the reentrant lock N for owner O and issue a fencing token.
-- KEYS[1]  the lock hash N (field O -> hold count)
-- KEYS[2]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- Returns {1, holdCount, token} when O now holds the lock,
-- or {0, pttl} when another owner holds it (pttl is -1 when the key has no expiry).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    local token = redis.call('incr', KEYS[2])
    return {1, count, token}
end
return {0, redis.call('pttl', KEYS[1])}
