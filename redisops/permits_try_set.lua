-- permits_try_set.lua: Redisson's RPermitExpirableSemaphore.trySetPermits(p): set the available
-- permits of the semaphore N if it has none yet.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- ARGV[1]  the permits p
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- Returns 1 when N was set (p is then published on the channel), 0 when N existed. The GET fails on a
-- key of another type before anything is written (WRONGTYPE).
local value = redis.call('get', KEYS[1])
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
