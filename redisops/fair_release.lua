-- fair_release.lua: retry-safe release of one hold of the fair lock N by owner O, with an optional local
-- handoff to the waiter at the head of the queue in the same call. When the lock becomes free and is not
-- handed off, only the waiter at the head of the queue is told, on its own channel.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the queue redisson_lock_queue:{N}
-- KEYS[3]  the timeouts redisson_lock_timeout:{N}
-- KEYS[4]  the unlock latch redisson_unlock_latch:{N}:<request id>
-- KEYS[5]  the fencing token counter redisson_lock_token:{N}
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
-- ARGV[9]  wait window in milliseconds: the scores of the waiters behind the next owner move back by
--          it when the next owner takes the lock, as in fair_acquire.lua
-- When the lock becomes free and the head is the next owner, it takes the lock exactly as if it had won
-- fair_acquire.lua: it leaves the queue and the timeouts (and, when it had a timeout, every remaining
-- score moves back one window), its hold count is 1, the expiry its lease, and a fencing token is
-- issued; nothing is published, since the lock is not free. Otherwise the lock is deleted and the head,
-- if any, told.
-- Returns {remaining, token, next}: remaining is O's hold count left (0 = released), or -1 when O holds
-- nothing; token is the next owner's fencing token when the lock was handed off to it, else 0; next is
-- the owner the lock was handed off to, or the waiter that was told it is at the head when the lock
-- became free, else "".
-- A retried call with the same request id returns the stored answer, "remaining:token:next" in the
-- latch, instead of releasing twice. (A latch of the older form "remaining:token" answers next "".)
local latched = redis.call('get', KEYS[4])
if latched then
    local sep = string.find(latched, ':', 1, true)
    local rest = string.sub(latched, sep + 1)
    local sep2 = string.find(rest, ':', 1, true)
    if not sep2 then
        return {tonumber(string.sub(latched, 1, sep - 1)), tonumber(rest), ''}
    end
    return {tonumber(string.sub(latched, 1, sep - 1)), tonumber(string.sub(rest, 1, sep2 - 1)),
        string.sub(rest, sep2 + 1)}
end

-- Purge the waiters at the head whose window has passed (server clock), so the live head is told.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then
        break
    end
    local score = redis.call('zscore', KEYS[3], head)
    if score and tonumber(score) > now then
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end

local held = redis.call('hget', KEYS[1], ARGV[2])
if not held then
    return {-1, 0}
end
local remaining = tonumber(held) - 1
local token = 0
local next = false
if remaining > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    redis.call('pexpire', KEYS[1], ARGV[1])
else
    redis.call('del', KEYS[1])
    next = redis.call('lindex', KEYS[2], 0)
    if next and next == ARGV[7] then
        -- The handoff: the next owner wins the lock as in fair_acquire.lua.
        redis.call('lpop', KEYS[2])
        if redis.call('zrem', KEYS[3], next) == 1 then
            local window = tonumber(ARGV[9])
            local waiters = redis.call('zrange', KEYS[3], 0, -1)
            for i = 1, #waiters do
                redis.call('zincrby', KEYS[3], -window, waiters[i])
            end
        end
        redis.call('hset', KEYS[1], next, 1)
        redis.call('pexpire', KEYS[1], ARGV[8])
        token = redis.call('incr', KEYS[5])
    elseif next then
        redis.call(ARGV[5], ARGV[6] .. ':' .. next, ARGV[3])
    end
end
redis.call('set', KEYS[4], string.format('%d:%d:%s', remaining, token, next or ''), 'px', ARGV[4])
return {remaining, token, next or ''}
