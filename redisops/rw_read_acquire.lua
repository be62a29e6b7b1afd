-- rw_read_acquire.lua: take one read hold of the read-write lock N for owner O.
-- KEYS[1]  the lock hash N (field mode = read|write, field O -> read count, field O:write -> write count)
-- KEYS[2]  O's read timeout key prefix {N}:O:rwlock_timeout; O's k-th read hold has the STRING key
--          <prefix>:<k> with that hold's own expiry
-- KEYS[3]  the write intent lockwarden_write_intent:{N} (STRING: the id of the writer waiting for the
--          readers to leave, with an expiry)
-- ARGV[1]  lease in milliseconds of this hold
-- ARGV[2]  owner id O
-- ARGV[3]  O's write field O:write
-- ARGV[4]  O's read count before this acquisition as far as the caller knows, or -1 if unknown.
--          When O's count is already above it, this call is a retry of one whose reply was lost:
--          it answers without taking a second hold, and raises that hold's expiry (and the hash's)
--          to at least the lease.
-- Allowed when mode is absent or read, or when mode is write and O is the writer (a downgrade).
-- A new reader (O holds no read hold and is not the writer) is refused while the write intent holds
-- another owner's id, whether the lock is free or read-locked, so that a stream of readers cannot starve
-- a waiting writer. Re-entries and downgrades are always allowed: refusing them would deadlock a reader
-- against the writer that waits for it to leave.
-- The hash's expiry is raised to the lease if it is shorter, so it outlives every read hold.
-- Returns {1, O's read count} when O now holds a read hold (reads get no fencing token),
-- {0, pttl} when another owner holds the write lock (pttl is -1 when the key has no expiry),
-- or {0, intent pttl} (at least 1) when a waiting writer's intent keeps O out.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data. No
-- key's type is read: the first command on each key refuses one of another type before anything is
-- written (HMGET on the lock, GET on the intent, SET ... GET on the hold's key, which comes before the
-- lock is written; Redis 6.2+, older servers read the hold key's type first). The owner's count, the
-- writer's and the kind check (kindMismatch) come from that one HMGET.
local lease = tonumber(ARGV[1])
local expected = tonumber(ARGV[4])
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2], ARGV[3])
local mode, current, writer = state[1], state[2], state[3]
if current and not mode then
    return kindRefusal(ARGV[2])
end
-- Counts go to commands and key names as strings: Redis 7.0 turns a Lua number passed to a command into
-- text with a floating-point printf, and Lua does the same for one concatenated to a string.
local currentArg = current
if current then
    current = tonumber(current)
    if expected >= 0 and current > expected then
        -- The caller counts the hold valid for a lease from when it sent this call, so the hold's key
        -- and the hash keep at least that long (raised, never cut). The hold found may be a dead one
        -- of the owner's, lost to the caller while Redis kept it (a renewal that took effect although
        -- its answer was lost), which the caller failed to clear, with little time left: answered as
        -- it was, it ran out under a holder told it had a full lease, and a writer got in.
        local holdKey = KEYS[2] .. ':' .. currentArg
        local holdType = redis.call('type', holdKey).ok
        if (holdType == 'none' or holdType == 'string') and redis.call('pttl', holdKey) < lease then
            redis.call('set', holdKey, '1', 'px', ARGV[1])
        end
        if redis.call('pttl', KEYS[1]) < lease then
            redis.call('pexpire', KEYS[1], ARGV[1])
        end
        return {1, current}
    end
end
if mode and mode ~= 'read' and not (mode == 'write' and writer) then
    return {0, redis.call('pttl', KEYS[1])}
end
if not current and not writer then
    local intent = redis.call('get', KEYS[3])
    if intent and intent ~= ARGV[2] then
        return {0, math.max(redis.call('pttl', KEYS[3]), 1)}
    end
end
-- The hold's own key must be free for a string (a lock may be named like it): SET ... GET refuses
-- another type without writing, and is the script's first write.
local count = (current or 0) + 1
local countArg = string.format('%d', count)
local holdKey = KEYS[2] .. ':' .. countArg
local set = redis.pcall('set', holdKey, '1', 'px', ARGV[1], 'get')
if type(set) == 'table' and set.err then
    if string.sub(set.err, 1, 9) == 'WRONGTYPE' then
        return redis.error_reply('WRONGTYPE ' .. holdKey .. ' holds a ' .. redis.call('type', holdKey).ok .. ', not a string')
    end
    -- Before Redis 6.2 SET has no GET option: the type is read first.
    local holdType = redis.call('type', holdKey).ok
    if holdType ~= 'none' and holdType ~= 'string' then
        return redis.error_reply('WRONGTYPE ' .. holdKey .. ' holds a ' .. holdType .. ', not a string')
    end
    redis.call('set', holdKey, '1', 'px', ARGV[1])
end
if not mode then
    -- A free lock (or a hash of a plain or fair lock without mode, see kindMismatch): one HSET, and the
    -- expiry set with PEXPIRE ... NX (Redis 7+) when the hash has none (a new one); otherwise (or on an
    -- older server) raised to the lease if it is shorter.
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], countArg)
    if redis.pcall('pexpire', KEYS[1], ARGV[1], 'nx') ~= 1 and redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, count}
end
redis.call('hset', KEYS[1], ARGV[2], countArg)
-- The expiry is raised to the lease if it is shorter (or absent). PTTL first: with many readers most
-- acquisitions come within the millisecond of the last one, which left the expiry at the lease.
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return {1, count}
