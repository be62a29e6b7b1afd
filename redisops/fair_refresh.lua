-- fair_refresh.lua: keep the places of live waiters in the queue of the fair lock N: each one's
-- deadline is raised to now + its window, so that only a waiter that stopped refreshing (its process
-- died) lapses, one window after its last refresh. Waiters at the head whose deadline has passed are
-- purged first and, when the lock is free, the waiter at the head is told: nothing else would purge
-- dead waiters in front of it while nobody tries.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the queue redisson_lock_queue:{N}
-- KEYS[3]  the timeouts redisson_lock_timeout:{N} (ZSET owner -> absolute ms after which it is gone)
-- KEYS[4]  the handoff registrations lockwarden_fair_handoff:{N}
-- ARGV[1]  message that tells the head waiter that the lock is free ("0")
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[3]  the unlock channel redisson_lock__channel:{N}; the head waiter W is told on <channel>:W
-- ARGV[2i+2], ARGV[2i+3]  a waiting owner and its wait window in milliseconds, for i = 1, 2, ...
-- Returns one integer per owner, in order: 2 when it is at the head of the queue and the lock is free
-- (it should try now), 1 when it is queued (its deadline is now at least now + its window), 0 when it
-- is not (purged, or it got the lock): its caller must try again.
-- A deadline is never lowered, so a waiter keeps whatever Redisson's arithmetic gave it.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
purgeLapsed(KEYS[2], KEYS[3], KEYS[4], now)
local head = redis.call('lindex', KEYS[2], 0)
local free = redis.call('exists', KEYS[1]) == 0
if head and free then
    redis.call(ARGV[2], ARGV[3] .. ':' .. head, ARGV[1])
end
local out = {}
local keep = 0
for i = 4, #ARGV - 1, 2 do
    local owner, window = ARGV[i], tonumber(ARGV[i + 1])
    local score = redis.call('zscore', KEYS[3], owner)
    if score then
        local deadline = now + window
        if tonumber(score) < deadline then
            redis.call('zadd', KEYS[3], deadline, owner)
        else
            deadline = tonumber(score)
        end
        if redis.call('hexists', KEYS[4], owner) == 1 then
            keep = math.max(keep, deadline - now)
        end
        if free and owner == head then
            out[#out + 1] = 2
        else
            out[#out + 1] = 1
        end
    else
        out[#out + 1] = 0
    end
end
-- The registrations live as long as the last registered waiter's deadline (fair_acquire.lua).
if keep > 0 and redis.call('pttl', KEYS[4]) < keep then
    redis.call('pexpire', KEYS[4], keep)
end
return out
