-- permits_set.lua: Redisson's RPermitExpirableSemaphore.setPermits(p): make p the total of the
-- semaphore N's permits, available and acquired, whatever it was.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- KEYS[3]  the ZSET {N}:timeout of acquired permits, id -> lease expiry in client epoch ms
-- ARGV[1]  the permits p
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[3]  now, client epoch ms
-- First the permits whose lease ended at now are taken back, as by Redisson's other calls (ZREM, INCRBY
-- N, and the new count published when above 0); this leaves the total unchanged. Then: N absent ->
-- SET N p; total equal to p -> nothing; else INCRBY N by p - total. p is published when anything
-- was set (Redisson's message: the total, not the available count). Returns nothing.
-- Keys of another type are refused before anything changes (WRONGTYPE).
local refused = wrongType({[1] = 'string', [3] = 'zset'})
if refused then
    return refused
end
local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[3], 'limit', 0, -1)
if #expiredIds > 0 then
    redis.call('zrem', KEYS[3], unpack(expiredIds))
    local value = redis.call('incrby', KEYS[1], #expiredIds)
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[2], value)
    end
end
local available = redis.call('get', KEYS[1])
if (available == false) then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return
end
local acquired = redis.call('zcount', KEYS[3], 0, '+inf')
local maximum = (acquired == false and 0 or acquired) + tonumber(available)
if (maximum == tonumber(ARGV[1])) then
    return
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - maximum)
redis.call(ARGV[2], KEYS[2], ARGV[1])
