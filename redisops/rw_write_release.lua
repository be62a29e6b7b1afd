-- rw_write_release.lua: retry-safe release of one write hold of the read-write lock N by owner O.
-- KEYS[1]  the lock hash N (field mode = read|write, field O -> read count, field O:write -> write count)
-- KEYS[2]  the channel redisson_rwlock:{N}
-- KEYS[3]  the unlock latch redisson_unlock_latch:{N}:<request id>
-- KEYS[4]  O's read timeout key prefix {N}:O:rwlock_timeout (hold k has the key <prefix>:<k>)
-- ARGV[1]  lease in milliseconds to keep while write holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  O's write field O:write
-- ARGV[4]  message published when the lock becomes free ("1": wakes every waiter)
-- ARGV[5]  latch expiry in milliseconds
-- ARGV[6]  publish command ("publish", or "spublish" for sharded pub/sub)
-- While write holds remain, the expiry is raised to the lease if it is shorter, never cut: the holds
-- left keep the time they have (a re-entry added its lease to it, see rw_write_acquire.lua). At the last write hold: when O holds read holds (a downgrade) the mode
-- becomes read and the hash's expiry the longest of O's timeout keys, and the message is published
-- too, because waiting readers may now share the lock (Redisson publishes nothing there, and its
-- readers wait for their retry timer); otherwise (or when those read holds have all run out) the hash
-- is deleted and the message published.
-- Returns O's write count left (0 = released), or -1 when O is not the writer.
-- A retried call with the same request id returns the stored answer instead of releasing twice.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local wrong = wrongType({[1] = 'hash', [3] = 'string'})
if wrong then
    return wrong
end
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(string.sub(latched, 1, string.find(latched, ':', 1, true) - 1))
end
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[3], ARGV[2])
local mode, held, reads = state[1], state[2], state[3]
if mode ~= 'write' or not held then
    return -1
end
local remaining = tonumber(held) - 1
if remaining > 0 then
    redis.call('hincrby', KEYS[1], ARGV[3], '-1')
    -- Raised only: the holds left (an outer hold with a longer lease, downgraded read holds) keep
    -- the time they have.
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
else
    local longest = -2
    if reads then
        for k = 1, tonumber(reads) do
            local ttl = redis.call('pttl', KEYS[4] .. ':' .. string.format('%d', k))
            if ttl > longest then
                longest = ttl
            end
        end
    end
    if longest > 0 then
        redis.call('hdel', KEYS[1], ARGV[3])
        redis.call('hset', KEYS[1], 'mode', 'read')
        redis.call('pexpire', KEYS[1], longest)
        redis.call(ARGV[6], KEYS[2], ARGV[4])
    else
        redis.call('del', KEYS[1])
        redis.call(ARGV[6], KEYS[2], ARGV[4])
    end
end
redis.call('set', KEYS[3], string.format('%d:0', remaining), 'px', ARGV[5])
return remaining
