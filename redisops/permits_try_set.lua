-- permits_try_set.lua: Redisson's RPermitExpirableSemaphore.trySetPermits(p): set the available
-- permits of the semaphore N if it has none yet.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- ARGV[1]  the permits p
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- KEYS[3]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[3]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Returns 1 when N was set (p is then published on the channel), 0 when N existed. The GET fails on a
-- key of another type before anything is written (WRONGTYPE).
-- Retries: with a latch, a run that finds it returns the answer stored there and changes nothing;
-- otherwise it stores its answer there.
local latched = tonumber(ARGV[3]) > 0
if latched then
    local answer = redis.call('get', KEYS[3])
    if answer then
        return tonumber(answer)
    end
end
local set = 0
if redis.call('get', KEYS[1]) == false then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    set = 1
end
if latched then
    redis.call('set', KEYS[3], set, 'px', ARGV[3])
end
return set
