-- sem_add.lua: Redisson's RSemaphore.addPermits(d), retry-safe: add d (which may be negative) to the
-- permits of the semaphore N, creating it from 0 when absent.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- KEYS[3]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[1]  the delta d
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[3]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Returns the new count, which it publishes on the channel, always (as Redisson does, also when it is
-- 0 or less). Like Redisson's it SETs N, so that N loses any expiry it had.
-- Retries: with a latch, a run that finds the latch returns the answer stored there and changes
-- nothing; otherwise it stores its answer there. The GETs fail on a key of another type before
-- anything is written (WRONGTYPE).
local latched = tonumber(ARGV[3]) > 0
if latched then
    local answer = redis.call('get', KEYS[3])
    if answer then
        return tonumber(answer)
    end
end
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
end
redis.call('set', KEYS[1], value + ARGV[1])
redis.call(ARGV[2], KEYS[2], value + ARGV[1])
local count = value + ARGV[1]
if latched then
    redis.call('set', KEYS[3], string.format('%d', count), 'px', ARGV[3])
end
return count
