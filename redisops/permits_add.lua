-- permits_add.lua: Redisson's RPermitExpirableSemaphore.addPermits(d), retry-safe: add d (which may be
-- negative) to the available permits of the semaphore N, creating it from 0 when absent.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- KEYS[3]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[1]  the delta d
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[3]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Publishes d (the delta, not the new count: Redisson's message) when d > 0. Like Redisson's it SETs
-- N, so that N loses any expiry it had. Returns 1.
-- Retries: with a latch, a run that finds the latch returns 1 and changes nothing; otherwise it stores
-- its answer there. The GETs fail on a key of another type before anything is written (WRONGTYPE).
local latched = tonumber(ARGV[3]) > 0
if latched then
    if redis.call('get', KEYS[3]) then
        return 1
    end
end
local value = redis.call('get', KEYS[1])
if (value == false) then
    value = 0
end
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
if latched then
    redis.call('set', KEYS[3], 1, 'px', ARGV[3])
end
return 1
