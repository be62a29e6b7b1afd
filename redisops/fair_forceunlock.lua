-- fair_forceunlock.lua: free the fair lock N whoever holds it, and tell the waiter at the head.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the queue redisson_lock_queue:{N}
-- KEYS[3]  the timeouts redisson_lock_timeout:{N}
-- KEYS[4]  the handoff registrations lockwarden_fair_handoff:{N}
-- ARGV[1]  message published to the head waiter when something was deleted ("0")
-- ARGV[2]  publish command ("publish" or "spublish")
-- ARGV[3]  the unlock channel redisson_lock__channel:{N}; the head waiter W is told on <channel>:W
-- Returns 1 when a lock was deleted, 0 when the lock was free.
-- Purge the waiters at the head whose window has passed (server clock), so the live head is told.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local refused = wrongType({[1] = 'hash', [2] = 'list', [3] = 'zset', [4] = 'hash'}) or familyMismatch(false)
if refused then
    return refused
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
purgeLapsed(KEYS[2], KEYS[3], KEYS[4], now)
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[2], ARGV[3] .. ':' .. head, ARGV[1])
    end
    return 1
end
return 0
