-- fair_release.lua: retry-safe release of one hold of the fair lock N by owner O. When the lock becomes
-- free, only the waiter at the head of the queue is told, on its own channel.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the queue redisson_lock_queue:{N}
-- KEYS[3]  the timeouts redisson_lock_timeout:{N}
-- KEYS[4]  the unlock latch redisson_unlock_latch:{N}:<request id>
-- ARGV[1]  lease in milliseconds to keep when holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  message published when the lock becomes free ("0")
-- ARGV[4]  latch expiry in milliseconds
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[6]  the unlock channel redisson_lock__channel:{N}; the head waiter W is told on <channel>:W
-- Returns {remaining, 0, next}: remaining is O's hold count left (0 = released), or -1 when O holds
-- nothing; next is the waiter that was told it is at the head when the lock became free, else "" (also
-- on a retried call, whose stored answer does not keep it).
-- A retried call with the same request id returns the stored answer instead of releasing twice.
local latched = redis.call('get', KEYS[4])
if latched then
    local sep = string.find(latched, ':', 1, true)
    return {tonumber(string.sub(latched, 1, sep - 1)), tonumber(string.sub(latched, sep + 1))}
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
local next = false
if remaining > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    redis.call('pexpire', KEYS[1], ARGV[1])
else
    redis.call('del', KEYS[1])
    next = redis.call('lindex', KEYS[2], 0)
    if next then
        redis.call(ARGV[5], ARGV[6] .. ':' .. next, ARGV[3])
    end
end
redis.call('set', KEYS[4], string.format('%d:%d', remaining, 0), 'px', ARGV[4])
return {remaining, 0, next or ''}
