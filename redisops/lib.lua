-- lib.lua: functions that the scripts share, each prepended to the scripts that call it (directly or
-- through another of them) when they are loaded (withLib in scripts.go), so that each is defined once.
-- withLib reads each function from the comment block above its "local function" line to the "end" at
-- the start of a line.

-- typeRefusal(i, got, want) is the WRONGTYPE error reply for KEYS[i], which holds a got where the
-- script keeps a want.
local function typeRefusal(i, got, want)
    return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. got .. ', not a ' .. want)
end

-- kindRefusal(owner) is the WRONGKIND error reply for an owner whose field in the lock hash KEYS[1]
-- belongs to the other family of locks (see kindMismatch).
local function kindRefusal(owner)
    return redis.error_reply('WRONGKIND ' .. KEYS[1] .. ' holds a hold of ' .. owner .. ' of another kind of lock')
end

-- wrongType(want) returns a WRONGTYPE error reply for the first KEYS[i] that holds a type other than
-- want[i] (a table index -> type name), or nil when every one is absent or of its type. A script
-- returns that reply before it changes anything: a key of another type (another lock's key taken as a
-- lock name, or data of the application) is never touched.
local function wrongType(want)
    for i, w in pairs(want) do
        local got = redis.call('type', KEYS[i]).ok
        if got ~= 'none' and got ~= w then
            return typeRefusal(i, got, w)
        end
    end
    return nil
end

-- kindMismatch(owner, rw) returns a WRONGKIND error reply when owner has a field in the lock hash
-- KEYS[1] that belongs to the other family of locks, or nil. A plain or fair lock (rw false) and a
-- read-write lock (rw true) share the hash; only a read-write lock has the field mode, and both keep
-- the owner's count in the field owner (a read count for a read-write lock). A script of one family
-- that took the other's field for its own would count, release or delete the other's holds (and a
-- release would delete the other owners' read holds with the hash), so it answers this before it
-- changes anything. It guards only the owner's own field: other owners' holds are not looked at, so
-- it keeps nothing apart across owners. Those are left as Redisson leaves them: a plain or fair script
-- finds a read-write lock taken by its hash, but rw_read_acquire.lua and rw_write_acquire.lua see no
-- mode in a plain or fair hash held by another owner, add mode to it and take it.
local function kindMismatch(owner, rw)
    local state = redis.call('hmget', KEYS[1], 'mode', owner)
    if state[2] and ((state[1] ~= false) ~= rw) then
        return kindRefusal(owner)
    end
    return nil
end

-- familyMismatch(rw) returns a WRONGKIND error reply when the lock hash KEYS[1] is a lock of the other
-- family than the script's (see kindMismatch): a read-write lock for a plain or fair script (rw false),
-- a plain or fair lock for a read-write script (rw true); nil when the lock is free or of the script's
-- family. The force unlocks check it, so that one family's force unlock never deletes the other's lock.
local function familyMismatch(rw)
    if redis.call('exists', KEYS[1]) == 1 and (redis.call('hexists', KEYS[1], 'mode') == 1) ~= rw then
        return redis.error_reply('WRONGKIND ' .. KEYS[1] .. ' holds another kind of lock')
    end
    return nil
end

-- issueToken(key, expiry) issues a token on the counter key (redisson_lock_token:{N}). With a token
-- expiry of 0 the counter is INCRed and kept forever (Redisson's RFencedLock). Otherwise a live counter
-- goes up by two (one INCRBY: the common case) and the token is the value between: the counter keeps
-- the token plus one for the holder's local handoff granted before Redis answers it (release.lua's
-- ARGV[12]), so that no other client is ever issued that token, even when the release that hands it
-- over never reaches Redis. A counter that is gone (expired, or never set), or that holds no integer,
-- is set from the server's clock in microseconds (the token) plus one, to expire the expiry (in ms)
-- later, so that a name leaves no key behind. A token taken from the clock is above every earlier
-- one: the counter was set from the clock (or raised by raiseTo or raise_token.lua, which keep it
-- until the clock has passed it) and then went up by two per acquisition of the name, far fewer than
-- the microseconds that pass before it expires.
-- Its first command on key (INCR or INCRBY) fails on a key of another type before it writes
-- anything, and raises the error: a script that issues the token before its other writes needs no
-- TYPE check of the counter to change nothing on a counter of another type.
-- expiry is the script's argument as it came (a decimal string), and is passed on to SET as it is:
-- Redis turns a Lua number passed to a command into text with a printf on every call, which costs
-- about as much as the command itself.
local function issueToken(key, expiry)
    if tonumber(expiry) == 0 then
        local token = redis.call('incr', key)
        redis.call('persist', key)
        return token
    end
    local ok, counter = pcall(redis.call, 'incrby', key, '2')
    if ok and counter > 2 then
        return counter - 1
    end
    if not ok and string.find(tostring(counter.err or counter), 'WRONGTYPE', 1, true) then
        error(counter)
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('set', key, string.format('%d', now + 1), 'px', expiry)
    return now
end

-- raiseTo(key, token, expiry) records on the fencing-token counter key (redisson_lock_token:{N}) the
-- token the caller has already given a holder it let in before the script ran (a local handoff
-- granted early, see release.lua): the token that the previous holder's issueToken kept for it, so
-- the counter holds it, and goes up to token plus one, keeping the next one in turn. It reports false,
-- leaving the counter as it is, when the counter is already above token (a RedLock floor raised it,
-- and the next holder must be above that). An expiring counter that is gone (or holds no integer) is
-- set from the clock when that is higher: tokens may have been issued from the clock since it expired
-- (this call may be a late copy of a release). token is the script's argument as it came (a decimal
-- string). With an expiry (ms, as issueToken's) the counter keeps its value until the server's clock
-- has passed it by the expiry; with 0 it is kept forever. Its first command on key (GET) fails on a
-- key of another type before it writes anything, and raises the error.
local function raiseTo(key, token, expiry)
    local old = tonumber(redis.call('get', key) or '')
    local value = tonumber(token)
    if old and old > value then
        return false
    end
    if tonumber(expiry) == 0 then
        redis.call('set', key, string.format('%d', value + 1))
        return true
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if not old then
        -- The counter is gone (it expired, maybe after tokens were issued from the clock: this may
        -- be a late copy of a release): it starts from the clock again, never below them.
        value = math.max(value, now)
    end
    redis.call('set', key, string.format('%d', value + 1), 'px', string.format('%d', tonumber(expiry) + math.max(0, math.ceil((value + 1 - now) / 1000))))
    return true
end

-- purgeLapsed(queue, timeouts, handoffs, now) pops from the head of a fair lock's queue (LIST queue,
-- ZSET timeouts of owner -> deadline in ms) every waiter whose deadline has passed at now (server ms),
-- or that has no deadline at all, with its handoff registration (HASH handoffs): Redisson's purge of
-- waiters that stopped waiting.
local function purgeLapsed(queue, timeouts, handoffs, now)
    while true do
        local head = redis.call('lindex', queue, 0)
        if not head then
            return
        end
        local score = redis.call('zscore', timeouts, head)
        if score and tonumber(score) > now then
            return
        end
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, head)
        redis.call('hdel', handoffs, head)
    end
end

-- shiftDeadlines(timeouts, window, now) moves every deadline of a fair lock's waiters (ZSET timeouts
-- of owner -> deadline in ms) back one window, as Redisson does when a waiter takes the lock, but never
-- below now + window (server ms): a deadline that a live waiter keeps fresh is about that far ahead.
local function shiftDeadlines(timeouts, window, now)
    local waiters = redis.call('zrange', timeouts, 0, -1, 'withscores')
    for i = 1, #waiters, 2 do
        local score = tonumber(waiters[i + 1])
        local moved = math.max(score - window, math.min(score, now + window))
        if moved ~= score then
            redis.call('zadd', timeouts, moved, waiters[i])
        end
    end
end

-- keepReadExpiry(lock, channel, readers, publish, message, before) brings the expiry of the read-write
-- lock hash lock, before ms (its PTTL), down to its longest live read hold's, late by at most 50 ms and
-- never early, after a read release; readers is the timeout key prefix of all readers ({N}:), and
-- publish and message publish the unlock message on channel. First it looks at the latest hold of a
-- reader or two picked at random (HRANDFIELD, Redis 6.2+; a reader's latest hold is usually its
-- longest): one that ends within 50 ms of the expiry keeps it. With many readers of similar leases one
-- usually does, and the walk over every reader's holds is skipped. The walk stops at the first hold
-- that ends within 50 ms of the expiry. A lock that now ends more than 50 ms sooner publishes the
-- message, so that a waiting writer does not sleep until the lease of a reader that has left (Redisson
-- publishes nothing there); a lock with no live hold left is deleted and the message published. It
-- returns true when it deleted the lock.
local function keepReadExpiry(lock, channel, readers, publish, message, before)
    local walk = true
    -- Fewer than two fields picked is the whole hash: with no holder among them the last reader left,
    -- and the walk has nothing to read.
    local free = false
    if before > 0 then
        -- pcall: before Redis 6.2 there is no HRANDFIELD, and the walk does it all.
        local pick = redis.pcall('hrandfield', lock, 2, 'withvalues')
        if type(pick) ~= 'table' or pick.err then
            pick = {}
        else
            free = #pick < 4
        end
        for i = 1, #pick, 2 do
            local count = tonumber(pick[i + 1])
            if pick[i] ~= 'mode' then
                free = false
            end
            if pick[i] ~= 'mode' and count and count > 0 then
                local ttl = redis.call('pttl', readers .. pick[i] .. ':rwlock_timeout:' .. pick[i + 1])
                if ttl > 0 and ttl + 50 >= before then
                    return false
                end
            end
        end
    end
    local longest = -2
    local fields = {}
    if not free then
        fields = redis.call('hgetall', lock)
    end
    for i = 1, #fields, 2 do
        local count = tonumber(fields[i + 1])
        if fields[i] ~= 'mode' and count then
            for k = 1, count do
                local ttl = redis.call('pttl', readers .. fields[i] .. ':rwlock_timeout:' .. string.format('%d', k))
                if ttl > longest then
                    longest = ttl
                end
            end
            if before > 0 and longest > 0 and longest + 50 >= before then
                return false
            end
        end
    end
    if longest > 0 and before > 0 and longest + 50 >= before then
        return false
    elseif longest > 0 then
        redis.call('pexpire', lock, string.format('%d', longest))
        if before > longest + 50 then
            redis.call(publish, channel, message)
        end
        return false
    end
    redis.call('del', lock)
    redis.call(publish, channel, message)
    return true
end
