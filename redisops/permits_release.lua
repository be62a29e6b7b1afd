-- permits_release.lua: Redisson's RPermitExpirableSemaphore.tryRelease(id): give back the permit id of
-- the semaphore N.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- KEYS[3]  the ZSET {N}:timeout of acquired permits, id (16 raw bytes) -> lease expiry in client epoch ms
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  the permits one id stands for: 1
-- ARGV[3]  now, client epoch ms
-- ARGV[4]  publish command ("publish", or "spublish" for sharded pub/sub)
-- When id is acquired: ZREM it, INCRBY N 1 and publish the new count, also when its lease had ended
-- (as Redisson does: the permit goes back all the same). Returns {removed, expired}: removed 1 when
-- the id was acquired, 0 when it was not (nothing changes); expired 1 when its lease had ended at now
-- (Redisson's tryRelease then answers false). A second run removes nothing: the call is idempotent.
-- Keys of another type are refused before anything changes (WRONGTYPE).
local refused = wrongType({[1] = 'string', [3] = 'zset'})
if refused then
    return refused
end
local expire = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if tonumber(removed) ~= 1 then
    return {0, 0}
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expire) <= tonumber(ARGV[3]) then
    return {1, 1}
end
return {1, 0}
