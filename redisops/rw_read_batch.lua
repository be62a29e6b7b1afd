-- rw_read_batch.lua: the read acquires and read releases of several owners on the read-write lock N in
-- one call, each answered as rw_read_acquire.lua or rw_read_release.lua answers it alone.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the channel redisson_rwlock:{N}
-- KEYS[3]  the write intent lockwarden_write_intent:{N}
-- ARGV[1]  latch expiry in milliseconds
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[3]  the timeout key prefix of all readers, {N}: (reader R's k-th hold has the key
--          <prefix>R:rwlock_timeout:<k>, and R's timeout key prefix is <prefix>R:rwlock_timeout)
-- ARGV[4]  message published when the lock becomes free ("0")
-- ARGV[5]  the calls' kinds, in the order the calls are to run, a letter each: "a" for a read acquire
--          (rw_read_acquire.lua), "r" for a read release (rw_read_release.lua)
-- Then, for n calls of which m are releases: the n owners, in the calls' order; the m releases'
-- unlock latches, in their order (redisson_unlock_latch:{N}:<owner> for a sequenced release, else
-- redisson_unlock_latch:{N}:<request id>); and two arguments per call: an acquire's lease in
-- milliseconds and its owner's read count as far as the caller knows (or -1), a release's sequence
-- number (or "" when its owner's releases are not sequenced) and "".
-- The owners must differ: a call on an owner that an earlier call of the batch names runs after it,
-- on its own, like every call of a batch that the shared path below does not take.
-- Returns an array with each call's answer, or the error reply its script alone would give.
--
-- Why one call: the per-call scripts cost Redis 16 commands per read acquire and release, most of
-- them on the hash that every reader shares. Here the calls share them: one HMGET reads the mode and
-- every owner's counts, one GET the intent, one MGET the sequenced releases' latches, one HSET and one
-- HDEL write the counts, one PTTL and at most one PEXPIRE keep the expiry, and the walk that keeps the
-- expiry at the longest hold runs once, on the state the batch leaves. What stays per call is the
-- hold's own key (SET ... GET, or PTTL and GETDEL) and a sequenced release's latch (SET).
--
-- The shared path takes a batch whose calls are all of the common kind: distinct owners; the lock in
-- read mode (or free, for acquires only); no acquire that is a retry of one that took effect (its
-- owner's count above the caller's); releases sequenced, of owners that hold a read hold, with
-- latches that are strings or absent; every hold of the owners named alive (at most 8 each); at most
-- 200 calls. A batch with any other call runs every call alone, in order, through the per-call
-- scripts' own code (readAcquireOne, readReleaseOne below), as separate calls in a pipeline would. A
-- hold key of another type than a string is refused for its call alone, in the shared path too.
--
-- The shared path answers each call as its script alone would, with the lock's expiry and publishing
-- decided once for the batch: the expiry ends where the calls, run one by one, would leave it (the
-- longest hold's, late by at most 50 ms, and never early), and the lock is deleted, and the message
-- published, when no live hold remains; a batch that frees the lock and takes it again (a release of
-- the last reader and an acquire of another) publishes nothing, since no one could see it free. It
-- may also keep the fields of readers outside the batch whose holds all ran out, which the calls
-- alone would have deleted with the lock in between: the next walk finds them dead.
local kinds = ARGV[5]
local count = #kinds
-- The arguments are read where they are rather than copied: every table and string the script makes
-- costs Redis more than most of the commands it sends. Call i's owner is ARGV[5 + i], the j-th
-- release's latch ARGV[latches + j], and call i's two arguments ARGV[args + 2i - 1] and ARGV[args + 2i].
local latches = 5 + count
local args = #ARGV - 2 * count
-- latchOf[i] is the index in ARGV of call i's latch, for a release.
local latchOf, releases = {}, 0
local shared = count >= 2 and count <= 200
local seen = {}
for i = 1, count do
    local kind, owner = string.byte(kinds, i), ARGV[5 + i]
    if kind == 114 then -- 'r'
        releases = releases + 1
        latchOf[i] = latches + releases
        if not tonumber(ARGV[args + 2 * i - 1]) then
            shared = false
        end
    elseif kind ~= 97 then -- 'a'
        return redis.error_reply('ERR rw_read_batch.lua: call ' .. i .. ' is of no kind')
    end
    if seen[owner] then
        shared = false
    end
    seen[owner] = true
end
if latches + releases ~= args then
    return redis.error_reply('ERR rw_read_batch.lua: ' .. #ARGV .. ' arguments for ' .. count .. ' calls')
end
-- alone runs call i as its own script would, and returns its answer, or the error reply it would give.
local function alone(i)
    local owner, x, y = ARGV[5 + i], ARGV[args + 2 * i - 1], ARGV[args + 2 * i]
    local timeouts = ARGV[3] .. owner .. ':rwlock_timeout'
    local ok, res = pcall(function()
        if not latchOf[i] then
            return readAcquireOne({KEYS[1], timeouts, KEYS[3]}, {x, owner, owner .. ':write', y})
        end
        return readReleaseOne({KEYS[1], KEYS[2], ARGV[latchOf[i]], timeouts}, {owner, ARGV[4], ARGV[1], ARGV[2], ARGV[3], x})
    end)
    if ok then
        return res
    end
    if type(res) == 'table' and res.err then
        return res
    end
    return redis.error_reply(tostring(res))
end

local function eachAlone()
    local out = {}
    for i = 1, count do
        out[i] = alone(i)
    end
    return out
end

if not shared then
    return eachAlone()
end

-- The state every call reads: the mode and each owner's read count. A writer's field is not read: in
-- read mode, or with no mode, no owner is the writer (the last write release deletes the write field
-- before it sets the read mode), and in write mode every call runs alone.
local state = redis.pcall('hmget', KEYS[1], 'mode', unpack(ARGV, 6, 5 + count))
if type(state) ~= 'table' or state.err then
    return eachAlone()
end
local mode = state[1]
if mode and mode ~= 'read' then
    return eachAlone()
end
-- A hash with no mode that exists is another kind of lock's (or a hold of an owner with ":write" in its
-- id), which the calls alone tell apart.
if not mode and redis.call('exists', KEYS[1]) == 1 then
    return eachAlone()
end
-- out[i] is call i's answer once it has one.
local out = {}
-- The sequenced releases' latches: one that holds this release's answer is a retry, answered as
-- stored; one with a higher number is a late copy, which changes nothing.
if releases > 0 then
    local latched = redis.call('mget', unpack(ARGV, latches + 1, latches + releases))
    for i = 1, count do
        if latchOf[i] then
            local last = latched[latchOf[i] - latches]
            if not last then
                -- MGET answers nil for a key of another type too, which the release alone refuses.
                if redis.call('type', ARGV[latchOf[i]]).ok ~= 'none' then
                    return eachAlone()
                end
            else
                local bar = string.find(last, '|', 1, true)
                local lastSeq = bar and tonumber(string.sub(last, 1, bar - 1))
                local seq = tonumber(ARGV[args + 2 * i - 1])
                if lastSeq == seq then
                    local colon = string.find(last, ':', bar, true)
                    out[i] = colon and tonumber(string.sub(last, bar + 1, colon - 1))
                    if not out[i] then
                        return eachAlone() -- a latch this script did not write
                    end
                elseif lastSeq and lastSeq > seq then
                    out[i] = -2
                end
            end
        end
    end
end
-- Every hold of an owner the batch names must be alive (its timeout key has an expiry left): one that
-- has run out makes the calls alone differ from the batch (a release's walk could free the lock
-- between two calls, so that a later call finds it free), and every call then runs alone. So in the
-- shared path a release's walk never frees the lock while a later call's owner holds, and the batch
-- answers as the calls alone do; it may keep the fields of other readers whose holds all ran out,
-- which the calls alone would have deleted with the lock, for the next walk to find. latest[i] is the
-- PTTL of the latest hold of call i's owner.
local latest = {}
local intentNeeded = false
for i = 1, count do
    local current = state[i + 1]
    local n = current and tonumber(current)
    if out[i] then
        -- answered by its latch
    elseif current and (not n or n < 1 or n > 8 or n ~= math.floor(n)) then
        return eachAlone()
    elseif not latchOf[i] then
        local expected = tonumber(ARGV[args + 2 * i]) or -1
        if current and (not mode or expected >= 0 and n > expected) then
            return eachAlone()
        end
        intentNeeded = intentNeeded or not current
    elseif not mode or not current then
        return eachAlone()
    end
    if not out[i] and current then
        for k = n, 1, -1 do
            local ttl = redis.call('pttl', ARGV[3] .. ARGV[5 + i] .. ':rwlock_timeout:' ..
                (k == n and current or string.format('%d', k)))
            if ttl <= 0 then
                return eachAlone()
            end
            latest[i] = latest[i] or ttl
        end
    end
end
local intent = false
if intentNeeded then
    intent = redis.pcall('get', KEYS[3])
    if type(intent) == 'table' and intent.err then
        return eachAlone()
    end
end

-- claim runs the first write on a hold's own key, SET ... GET or GETDEL, whose reply is given (from
-- redis.pcall). It returns the WRONGTYPE error reply of the call when the key holds another type than
-- a string (the call is then refused, and nothing of it written), or nil. Before Redis 6.2 (no
-- SET ... GET, no GETDEL) the type is read first and the write made without the option.
local function claim(holdKey, reply, lease)
    if type(reply) ~= 'table' or not reply.err then
        return nil
    end
    local holdType = redis.call('type', holdKey).ok
    if string.sub(reply.err, 1, 9) == 'WRONGTYPE' or (holdType ~= 'none' and holdType ~= 'string') then
        return redis.error_reply('WRONGTYPE ' .. holdKey .. ' holds a ' .. holdType .. ', not a string')
    end
    if lease then
        redis.call('set', holdKey, '1', 'px', lease)
    else
        redis.call('del', holdKey)
    end
    return nil
end

-- Nothing is written above. Each call now runs in order on its owner's own key; the writes to the hash
-- wait for the end. before is the hash's PTTL before the batch.
local before = redis.call('pttl', KEYS[1])
local counts, dropped, released, stored = {}, {}, {}, {}
local longestLease, intentTTL
local holder = false -- a call leaves its owner holding
local check = false  -- a release that may have let the lock end sooner
for i = 1, count do
    local owner, current = ARGV[5 + i], state[i + 1]
    if out[i] then
        -- answered by its latch
    elseif not latchOf[i] then
        if not current and intent and intent ~= owner then
            intentTTL = intentTTL or math.max(redis.call('pttl', KEYS[3]), 1)
            out[i] = {0, intentTTL}
        else
            local n = (tonumber(current) or 0) + 1
            local nArg = string.format('%d', n)
            local holdKey = ARGV[3] .. owner .. ':rwlock_timeout:' .. nArg
            local lease = ARGV[args + 2 * i - 1]
            local refusal = claim(holdKey, redis.pcall('set', holdKey, '1', 'px', lease, 'get'), lease)
            if refusal then
                out[i] = refusal
            else
                counts[#counts + 1] = owner
                counts[#counts + 1] = nArg
                lease = tonumber(lease)
                if not longestLease or lease > longestLease then
                    longestLease = lease
                end
                holder = true
                out[i] = {1, n}
            end
        end
    else
        local holdKey = ARGV[3] .. owner .. ':rwlock_timeout:' .. current
        local ttl = latest[i]
        local refusal = claim(holdKey, redis.pcall('getdel', holdKey))
        if refusal then
            out[i] = refusal
        else
            local remaining = tonumber(current) - 1
            local remainingArg = '0'
            if remaining > 0 then
                remainingArg = string.format('%d', remaining)
                counts[#counts + 1] = owner
                counts[#counts + 1] = remainingArg
                holder = true
            else
                dropped[#dropped + 1] = owner
            end
            stored[i] = remainingArg
            -- As in rw_read_release.lua: a hold that ended within 2 ms of the lock may have been the
            -- longest.
            if not (ttl + 2 < before) then
                check = true
            end
            released[#released + 1] = i
            out[i] = remaining
        end
    end
end

-- The hash's writes: one HSET (with the mode, for a free lock), one HDEL.
if #counts > 0 then
    if not mode then
        redis.call('hset', KEYS[1], 'mode', 'read', unpack(counts))
    else
        redis.call('hset', KEYS[1], unpack(counts))
    end
end
if #dropped > 0 then
    redis.call('hdel', KEYS[1], unpack(dropped))
end
-- The expiry is raised to the longest lease taken if it is shorter (see rw_read_acquire.lua).
local expiry = before
if longestLease then
    if not mode then
        if redis.pcall('pexpire', KEYS[1], longestLease, 'nx') ~= 1 and redis.call('pttl', KEYS[1]) < longestLease then
            redis.call('pexpire', KEYS[1], longestLease)
        end
        expiry = redis.call('pttl', KEYS[1])
    elseif expiry < longestLease then
        redis.call('pexpire', KEYS[1], longestLease)
        expiry = longestLease
    end
end
-- A release of a hold shorter than the lock keeps the expiry only while a holder is left.
if not check and not holder and #dropped > 0 then
    check = redis.call('hlen', KEYS[1]) <= 1
end
-- The walk of rw_read_release.lua (keepReadExpiry), once, on the state the batch leaves. A hold taken
-- here ends at its lease, so one that ends within 50 ms of the expiry keeps it.
if check and not (longestLease and longestLease + 50 >= expiry) then
    keepReadExpiry(KEYS[1], KEYS[2], ARGV[3], ARGV[2], ARGV[4], expiry)
end

-- Each sequenced release stores its answer in its owner's latch. (When the walk freed the lock, every
-- release here left its owner nothing: a hold left would be alive, see above.)
for _, i in ipairs(released) do
    redis.call('set', ARGV[latchOf[i]], ARGV[args + 2 * i - 1] .. '|' .. stored[i] .. ':0', 'px', ARGV[1])
end
return out
