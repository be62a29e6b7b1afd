-- permits_acquire.lua: Redisson's RPermitExpirableSemaphore.tryAcquire(n, lease) (4.x, one id per
-- permit): take n permits of the semaphore N, each under its own id, with one lease expiry.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the ZSET {N}:timeout of acquired permits, id (16 raw bytes) -> lease expiry in client epoch ms
-- KEYS[3]  the channel redisson_sc:{N}
-- ARGV[1]  n, the number of permits (and of ids)
-- ARGV[2]  the lease expiry of the permits, client epoch ms, or the no-lease score 922337203685477
-- ARGV[3]  now, client epoch ms
-- ARGV[4]  the no-lease score 922337203685477
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[6..5+n]  the permit ids, 16 raw bytes each
-- First up to n permits whose lease ended at now are taken back (ZREM, INCRBY N, the new count
-- published when above 0). Then, if N holds at least n: DECRBY N n, ZADD each id with the expiry, and
-- PEXPIRE the ZSET to N's PTTL when N has one.
-- Returns {1, 0, 0} when the permits were taken; {0, 1, s} when not, s being the lowest expiry among
-- the acquired permits when it is not the no-lease score (Redisson's ':' .. s answer: the waiter
-- tries again then at the latest); {0, 0, 0} when not, with nothing to wait for but a message
-- (Redisson's nil).
-- Retries: a run that finds the first id already acquired is a retry of a call that took the permits,
-- and answers {1, 0, 0} without changing anything. Keys of another type are refused before anything
-- changes (WRONGTYPE).
local refused = wrongType({[1] = 'string', [2] = 'zset'})
if refused then
    return refused
end
if redis.call('zscore', KEYS[2], ARGV[6]) then
    return {1, 0, 0}
end
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds))
    local value = redis.call('incrby', KEYS[1], #expiredIds)
    if tonumber(value) > 0 then
        redis.call(ARGV[5], KEYS[3], value)
    end
end
local value = redis.call('get', KEYS[1])
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV, 1 do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, 0, 0}
end
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if v[1] ~= nil and v[2] ~= ARGV[4] then
    return {0, 1, tonumber(v[2])}
end
return {0, 0, 0}
