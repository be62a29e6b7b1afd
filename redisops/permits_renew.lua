-- permits_renew.lua: lockwarden's watchdog renewal of many permits of the semaphore N at once, as
-- Redisson's RPermitExpirableSemaphore.updateLeaseTime(id, lease) renews one.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the ZSET {N}:timeout of acquired permits, id (16 raw bytes) -> lease expiry in client epoch ms
-- KEYS[3]  the channel redisson_sc:{N}
-- ARGV[1]  the new lease expiry, client epoch ms, or the no-lease score 922337203685477
-- ARGV[2]  now, client epoch ms
-- ARGV[3]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[4..]  the permit ids, 16 raw bytes each
-- First every permit whose lease ended at now is taken back (ZREM, INCRBY N, the new count published
-- when above 0). Then each id still acquired gets the new expiry (ZADD XX).
-- Returns one integer per id, in order: 1 when renewed, 0 when the id is not acquired (released, or
-- its lease ended and it was taken back). Keys of another type are refused before anything changes
-- (WRONGTYPE).
local refused = wrongType({[1] = 'string', [2] = 'zset'})
if refused then
    return refused
end
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[2], 'limit', 0, -1)
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds))
    local value = redis.call('incrby', KEYS[1], #expiredIds)
    if tonumber(value) > 0 then
        redis.call(ARGV[3], KEYS[3], value)
    end
end
local out = {}
for i = 4, #ARGV do
    local renewed = 0
    if redis.call('zscore', KEYS[2], ARGV[i]) ~= false then
        redis.call('zadd', KEYS[2], 'xx', ARGV[1], ARGV[i])
        renewed = 1
    end
    out[i - 3] = renewed
end
return out
