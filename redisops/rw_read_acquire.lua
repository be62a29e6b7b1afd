-- rw_read_acquire.lua: take one read hold of the read-write lock N for owner O.
-- KEYS[1]  the lock hash N (field mode = read|write, field O -> read count, field O:write -> write count)
-- KEYS[2]  O's read timeout key prefix {N}:O:rwlock_timeout; O's k-th read hold has the STRING key
--          <prefix>:<k> with that hold's own expiry
-- ARGV[1]  lease in milliseconds of this hold
-- ARGV[2]  owner id O
-- ARGV[3]  O's write field O:write
-- ARGV[4]  O's read count before this acquisition as far as the caller knows, or -1 if unknown.
--          When O's count is already above it, this call is a retry of one whose reply was lost:
--          it answers without taking a second hold.
-- Allowed when mode is absent or read, or when mode is write and O is the writer (a downgrade).
-- The hash's expiry is raised to the lease if it is shorter, so it outlives every read hold.
-- Returns {1, O's read count} when O now holds a read hold (reads get no fencing token),
-- or {0, pttl} when another owner holds the write lock (pttl is -1 when the key has no expiry).
local lease = tonumber(ARGV[1])
local expected = tonumber(ARGV[4])
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2], ARGV[3])
local mode, current = state[1], state[2]
if current then
    current = tonumber(current)
    if expected >= 0 and current > expected then
        return {1, current}
    end
end
if mode and mode ~= 'read' and not (mode == 'write' and state[3]) then
    return {0, redis.call('pttl', KEYS[1])}
end
if not mode then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. count, 1, 'px', lease)
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return {1, count}
