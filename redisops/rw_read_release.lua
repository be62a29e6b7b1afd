-- rw_read_release.lua: retry-safe release of one read hold of the read-write lock N by owner O.
-- KEYS[1]  the lock hash N (field mode = read|write, field R -> read count of reader R)
-- KEYS[2]  the channel redisson_rwlock:{N}
-- KEYS[3]  the unlock latch: with ARGV[6] set, O's own latch redisson_unlock_latch:{N}:<O>, holding
--          "<sequence>|<remaining>:0" of O's last sequenced release (see release.lua); otherwise the
--          latch of this request, redisson_unlock_latch:{N}:<request id>
-- KEYS[4]  O's read timeout key prefix {N}:O:rwlock_timeout (hold k has the key <prefix>:<k>)
-- ARGV[1]  owner id O
-- ARGV[2]  message published when the lock becomes free ("0")
-- ARGV[3]  latch expiry in milliseconds
-- ARGV[4]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[5]  the timeout key prefix of all readers, {N}: ; reader R's k-th hold has the key
--          <prefix>R:rwlock_timeout:<k>. The other readers' keys cannot be listed in KEYS since only
--          the hash knows who they are; they are built here, as Redisson does, and share the hash tag
--          {N}, so they live in the lock's Redis Cluster slot.
-- ARGV[6]  this release's sequence number when O's releases are sequenced (a decimal integer, higher
--          for every release of O on N than for the one before), or "" when they are not
-- Drops O's latest read hold and its timeout key. While a writer holds the lock (O itself, after a
-- downgrade) the hash's expiry stands. Otherwise the hash's expiry becomes the longest remaining timeout
-- key's, and when that is more than 50 ms sooner than before the message is published too (a waiting
-- writer then learns the new expiry); when no read hold is left (or every one left has run out), the hash is
-- deleted and the message published.
-- The walk stops at the first remaining hold that ends within 50 ms of the hash's expiry: the expiry
-- then stands (late by at most 50 ms), so with many readers of similar leases a walk is short. Before
-- walking, the latest holds of up to two fields picked with HRANDFIELD (Redis 6.2+; older servers just
-- walk) are looked at by the same rule, which with such readers usually spares the walk (and its
-- HGETALL) altogether.
-- Fast path, O(1) instead of a walk over every reader's timeout keys: in read mode the hash's PTTL is
-- the longest hold's, because every read acquire and read renew raises it to that hold's lease, and a
-- downgrade and every walk set it to the longest timeout key. So when the released hold was still alive,
-- its PTTL was lower than the hash's by more than a slack of 2 ms (for rounding), and the hash still has
-- a holder field, another hold with a longer or equal expiry remains: removing a shorter one cannot
-- change the longest remaining hold, so the hash's expiry, nor free the lock. Then nothing is walked, the
-- expiry is left alone and nothing is published. A released hold that was the longest (within the slack)
-- or had already run out, or a hash left with no holder, takes the walk. A hash whose expiry is longer
-- than every hold (Redisson's write unlock keeps the write lease after a downgrade) keeps it until a walk:
-- the lock is then freed late, never early.
-- Returns O's read count left (0 = O holds no read hold any more), -1 when O holds no read hold, or
-- -2 when a sequenced release of O with a higher number has already run (this call is a late copy of an
-- older one, and changes nothing).
-- A retried call with the same request id returns the stored answer instead of releasing twice. A
-- sequenced release reads O's latch first and writes it last (overwriting it, so that a busy owner
-- creates no key per release); one that finds no hold stores that answer too, so that a late copy of
-- it does not release a hold O took since.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data. No
-- key's type is read: the first command on each key refuses one of another type before it writes
-- (HMGET on the lock, GET or SET ... NX GET on the latch, GETDEL on the hold's key; older servers read
-- the hold key's type first), and a latch stored before a hold key of another type is found is deleted
-- again before the refusal.
-- A sequenced release GETs O's latch first and SETs it last. An unsequenced one stores its answer in
-- the request's latch before the release, with SET ... NX GET (Redis 7+), which also reads an earlier
-- run's answer, so the latch costs one command (older servers GET it first and SET it last).
local function answer(latched)
    return tonumber(string.sub(latched, 1, string.find(latched, ':', 1, true) - 1))
end
local seq = ARGV[6] ~= '' and tonumber(ARGV[6])
if seq then
    local last = redis.call('get', KEYS[3])
    local bar = last and string.find(last, '|', 1, true)
    local lastSeq = bar and tonumber(string.sub(last, 1, bar - 1))
    if lastSeq == seq then
        return answer(string.sub(last, bar + 1))
    end
    if lastSeq and lastSeq > seq then
        return -2
    end
end
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[1])
local mode, held = state[1], state[2]
if not mode or not held then
    if seq then
        redis.call('set', KEYS[3], ARGV[6] .. '|-1:0', 'px', ARGV[3])
        return -1
    end
    local latched = redis.call('get', KEYS[3])
    if latched then
        return answer(latched)
    end
    return -1
end
-- Counts go to commands and key names as strings: Redis 7.0 turns a Lua number passed to a command into
-- text with a floating-point printf, and Lua does the same for one concatenated to a string.
local holdKey = KEYS[4] .. ':' .. held
held = tonumber(held)
local remaining = held - 1
local released = redis.call('pttl', holdKey)
local stored
if not seq then
    stored = string.format('%d:0', remaining)
    local latched = redis.pcall('set', KEYS[3], stored, 'px', ARGV[3], 'nx', 'get')
    if type(latched) == 'table' and latched.err then
        if string.sub(latched.err, 1, 9) == 'WRONGTYPE' then
            return latched
        end
        -- Before Redis 7 SET takes NX and GET only apart: the latch is read here and written last.
        stored = nil
        latched = redis.call('get', KEYS[3])
    end
    if latched then
        return answer(latched)
    end
end
-- unstore deletes the latch this run stored, before a refusal.
local function unstore()
    if stored then
        redis.call('del', KEYS[3])
    end
end
-- The hold's own key is deleted first: it must be a string (a lock may be named like it), and GETDEL
-- refuses another type without deleting it.
local deleted = redis.pcall('getdel', holdKey)
if type(deleted) == 'table' and deleted.err then
    if string.sub(deleted.err, 1, 9) == 'WRONGTYPE' then
        unstore()
        return redis.error_reply('WRONGTYPE ' .. holdKey .. ' holds a ' .. redis.call('type', holdKey).ok .. ', not a string')
    end
    -- Before Redis 6.2 there is no GETDEL: the type is read first.
    local holdType = redis.call('type', holdKey).ok
    if holdType ~= 'none' and holdType ~= 'string' then
        unstore()
        return redis.error_reply('WRONGTYPE ' .. holdKey .. ' holds a ' .. holdType .. ', not a string')
    end
    redis.call('del', holdKey)
end
if remaining > 0 then
    redis.call('hset', KEYS[1], ARGV[1], string.format('%d', remaining))
else
    redis.call('hdel', KEYS[1], ARGV[1])
end
-- The hash's expiry before this release (a write hold's expiry stands, so it is not needed then).
local before = -2
if mode ~= 'write' then
    before = redis.call('pttl', KEYS[1])
end
-- The fast path (see above): a longer hold remains, so the expiry stands and the lock is not free.
-- O's own field, when it keeps holds, is a holder left (no HLEN needed).
local shorter = mode == 'read' and released > 0 and released + 2 < before
    and (remaining > 0 or redis.call('hlen', KEYS[1]) > 1)
-- Otherwise the expiry becomes the longest live hold's (keepReadExpiry); a lock with none left is
-- deleted, which frees it under holds of O's that had all run out.
if mode ~= 'write' and not shorter and keepReadExpiry(KEYS[1], KEYS[2], ARGV[5], ARGV[4], ARGV[2], before) then
    remaining = 0
end
-- A sequenced release stores its answer now. An unsequenced one stored it above, and that holds this
-- answer unless the walk freed the lock under holds of O's that had all run out.
local final = string.format('%d:0', remaining)
if seq then
    redis.call('set', KEYS[3], ARGV[6] .. '|' .. final, 'px', ARGV[3])
elseif final ~= stored then
    redis.call('set', KEYS[3], final, 'px', ARGV[3])
end
return remaining
