-- fair_release.lua: retry-safe release of one hold of the fair lock N by owner O. When the lock becomes
-- free it goes straight to the waiter at the head of the queue if that waiter is the caller's local
-- next owner, or registered for handoffs; otherwise only the head waiter is told, on its own channel.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the queue redisson_lock_queue:{N}
-- KEYS[3]  the timeouts redisson_lock_timeout:{N}
-- KEYS[4]  the unlock latch redisson_unlock_latch:{N}:<request id>
-- KEYS[5]  the fencing token counter redisson_lock_token:{N}
-- KEYS[6]  the handoff registrations lockwarden_fair_handoff:{N} (HASH owner -> "lease:window:wait id")
-- ARGV[1]  lease in milliseconds to keep when holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  message published when the lock becomes free ("0")
-- ARGV[4]  latch expiry in milliseconds
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[6]  the unlock channel redisson_lock__channel:{N}; the head waiter W is told on <channel>:W
-- ARGV[7]  next owner to hand the lock to when it becomes free, or "" for none. The lock goes to it
--          only when it is the head of the queue once the waiters whose window has passed are purged,
--          so the queue order stays strict.
-- ARGV[8]  lease in milliseconds for the next owner
-- ARGV[9]  wait window in milliseconds of ARGV[7]: the scores of the waiters behind the new holder move
--          back by it (by a registered waiter's own window) when it takes the lock, as in fair_acquire.lua
-- ARGV[10] "1" when the lock may go to a head waiter that registered for handoffs (fair_acquire.lua
--          ARGV[6]) with its registered lease, if that lease ends before the waiter's deadline in the
--          timeouts; that waiter is told on its channel with ARGV[11] followed by "<token>:<wait id>".
--          "0" ignores the registrations.
-- ARGV[11] the prefix of the message that tells a registered waiter it now holds the lock
-- ARGV[12]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- When the lock becomes free and the head is the next owner or a registered waiter, it takes the lock
-- exactly as if it had won fair_acquire.lua: it leaves the queue, the timeouts and the registrations
-- (and, when it had a timeout, every remaining score moves back one window, but not below now + that
-- window), its hold count is 1, the
-- expiry its lease, and a fencing token is issued; the lock is not free, so no "0" is published.
-- Otherwise the lock is deleted and the head, if any, told.
-- Returns {remaining, token, next, registered}: remaining is O's hold count left (0 = released), or -1
-- when O holds nothing; token is the new holder's fencing token when the lock was handed off, else 0;
-- next is the owner the lock was handed off to, or the waiter that was told it is at the head when the
-- lock became free, else ""; registered is 1 when the lock went to a registered waiter other than
-- ARGV[7], which was told so, else 0.
-- A retried call with the same request id returns the stored answer instead of releasing twice: the
-- latch holds "remaining:token:next", with R before the token when registered is 1. (Older latches,
-- "remaining:token", answer next "".)
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local wrong = wrongType({[1] = 'hash', [2] = 'list', [3] = 'zset', [4] = 'string', [5] = 'string', [6] = 'hash'})
if wrong then
    return wrong
end
local latched = redis.call('get', KEYS[4])
if latched then
    local remaining, mark, token, next = string.match(latched, '^(-?%d+):(R?)(%d+):?(.*)$')
    local registered = 0
    if mark == 'R' then
        registered = 1
    end
    return {tonumber(remaining), tonumber(token), next, registered}
end
local mismatch = kindMismatch(ARGV[2], false)
if mismatch then
    return mismatch
end

-- Purge the waiters at the head whose window has passed (server clock), so the live head is told.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
purgeLapsed(KEYS[2], KEYS[3], KEYS[6], now)

local held = redis.call('hget', KEYS[1], ARGV[2])
if not held then
    return {-1, 0, '', 0}
end
local remaining = tonumber(held) - 1
local token = 0
local next = false
local registered = 0
local waitID = ''
if remaining > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], '-1')
    redis.call('pexpire', KEYS[1], ARGV[1])
else
    redis.call('del', KEYS[1])
    next = redis.call('lindex', KEYS[2], 0)
    local lease, window = false, tonumber(ARGV[9])
    if next and next == ARGV[7] then
        lease = ARGV[8]
    elseif next and ARGV[10] == '1' then
        -- Only a lease that ends before the waiter's deadline: should the waiter be dead, the lock is
        -- free again no later than the others would have purged it.
        local reg = redis.call('hget', KEYS[6], next)
        local deadline = redis.call('zscore', KEYS[3], next)
        if reg and deadline then
            local l, w, id = string.match(reg, '^(%d+):(%d+):(.*)$')
            if l and tonumber(deadline) >= now + tonumber(l) then
                lease, window, registered, waitID = l, tonumber(w), 1, id
            end
        end
    end
    if lease then
        -- The handoff: the head wins the lock as in fair_acquire.lua.
        redis.call('lpop', KEYS[2])
        redis.call('hdel', KEYS[6], next)
        if redis.call('zrem', KEYS[3], next) == 1 then
            -- As in fair_acquire.lua: one window back, but never below now + window.
            shiftDeadlines(KEYS[3], window, now)
        end
        redis.call('hset', KEYS[1], next, '1')
        redis.call('pexpire', KEYS[1], lease)
        token = issueToken(KEYS[5], ARGV[12])
        if registered == 1 then
            redis.call(ARGV[5], ARGV[6] .. ':' .. next, ARGV[11] .. string.format('%d', token) .. ':' .. waitID)
        end
    elseif next then
        redis.call(ARGV[5], ARGV[6] .. ':' .. next, ARGV[3])
    end
end
local mark = ''
if registered == 1 then
    mark = 'R'
end
redis.call('set', KEYS[4], string.format('%d:%s%d:%s', remaining, mark, token, next or ''), 'px', ARGV[4])
return {remaining, token, next or '', registered}
