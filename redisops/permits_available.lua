-- permits_available.lua: Redisson's RPermitExpirableSemaphore.availablePermits(): the available
-- permits of the semaphore N after taking back those whose lease ended.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the ZSET {N}:timeout of acquired permits, id (16 raw bytes) -> lease expiry in client epoch ms
-- KEYS[3]  the channel redisson_sc:{N}
-- ARGV[1]  now, client epoch ms
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- First every permit whose lease ended at now is taken back (ZREM, INCRBY N, the new count published
-- when above 0). Returns N's count, 0 when absent. Keys of another type are refused before anything
-- changes (WRONGTYPE).
local refused = wrongType({[1] = 'string', [2] = 'zset'})
if refused then
    return refused
end
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds))
    local value = redis.call('incrby', KEYS[1], #expiredIds)
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[3], value)
    end
    return value
end
local ret = redis.call('get', KEYS[1])
return ret == false and 0 or tonumber(ret)
