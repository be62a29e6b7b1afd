-- rw_write_acquire.lua: take or re-enter the write lock of the read-write lock N for owner O and issue a
-- fencing token; a writer refused by readers may leave its intent, which keeps new readers out.
-- KEYS[1]  the lock hash N (field mode = read|write, field O -> read count, field O:write -> write count)
-- KEYS[2]  the fencing token counter redisson_lock_token:{N}
-- KEYS[3]  the write intent lockwarden_write_intent:{N} (STRING: the id of the writer waiting for the
--          readers to leave, with an expiry)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- ARGV[3]  O's write field O:write
-- ARGV[4]  O's write count before this acquisition as far as the caller knows, or -1 if unknown.
--          When O's count is already above it, this call is a retry of one whose reply was lost:
--          it answers without taking a second hold, with a fresh token.
-- ARGV[5]  write intent expiry in milliseconds, or 0 to leave no intent
-- ARGV[6]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- Allowed when mode is absent, or when mode is write and O is the writer (re-entry). A first hold sets
-- the expiry to the lease; a re-entry adds the lease to the expiry left (Redisson: pttl + lease), so the
-- outer hold keeps the time it had; a retry (see ARGV[4]) raises it to at least the lease. An owner that
-- holds read holds and is not the writer is refused without any change: it would wait for itself.
-- When O is refused because other owners hold the lock in read mode and ARGV[5] > 0, the intent is set
-- to O with that expiry, or its expiry refreshed when it already holds O; an intent of another owner is
-- left alone (the first waiting writer keeps its place). A refusal by another writer sets nothing:
-- after its unlock, readers and writers race as in Redisson. When O gets the write lock (retry and
-- re-entry included), the intent is deleted if it holds O.
-- Returns {1, O's write count, token} when O now holds the write lock,
-- {0, pttl} when other owners hold the lock (pttl is -1 when the key has no expiry),
-- or {-1} when O holds read holds and is not the writer (an upgrade).
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local refused = wrongType({[1] = 'hash', [2] = 'string', [3] = 'string'}) or kindMismatch(ARGV[2], true)
if refused then
    return refused
end
local expected = tonumber(ARGV[4])
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[3], ARGV[2])
local mode, current, reads = state[1], state[2], state[3]

-- O holds the write lock now: its own intent has served.
local function clearIntent()
    if redis.call('get', KEYS[3]) == ARGV[2] then
        redis.call('del', KEYS[3])
    end
end

if current then
    current = tonumber(current)
    if expected >= 0 and current > expected then
        clearIntent()
        -- The caller counts the hold valid for a lease from when it sent this call, so the expiry is
        -- raised to at least the lease (never cut: a retried re-entry added its lease already). The
        -- hold found may be a dead one of the owner's with little time left (see below): answered as
        -- it was, it ran out under a holder told it had a full lease.
        local left = redis.call('pttl', KEYS[1])
        if left >= 0 and left < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[1], ARGV[1])
        end
        -- A fresh token, never the counter's value: the hold found may also be a dead one of the
        -- owner's, lost to the caller (its Done closed) while Redis kept it (a renewal that took
        -- effect although its answer was lost), which the caller failed to clear; answering the
        -- counter gave it that hold's token a second time. The token of a lost reply was never seen,
        -- so a fresh one costs nothing but a gap.
        return {1, current, issueToken(KEYS[2], ARGV[6])}
    end
elseif reads then
    return {-1}
elseif mode then
    local intent = tonumber(ARGV[5])
    if mode == 'read' and intent > 0 then
        local holder = redis.call('get', KEYS[3])
        if not holder or holder == ARGV[2] then
            redis.call('set', KEYS[3], ARGV[2], 'px', intent)
        end
    end
    return {0, redis.call('pttl', KEYS[1])}
end
local count = 1
if current then
    -- A re-entry adds its lease to the time left, as Redisson's write lock does: a shorter inner lease
    -- must not cut the outer hold (nor O's downgraded read holds) short.
    count = redis.call('hincrby', KEYS[1], ARGV[3], '1')
    local left = redis.call('pttl', KEYS[1])
    if left > 0 then
        redis.call('pexpire', KEYS[1], left + tonumber(ARGV[1]))
    elseif left ~= -1 then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
else
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[3], '1')
    redis.call('pexpire', KEYS[1], ARGV[1])
end
clearIntent()
return {1, count, issueToken(KEYS[2], ARGV[6])}
