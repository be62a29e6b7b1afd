-- fair_cancel.lua: remove owner O, a waiter that gave up, from the queue of the fair lock N.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the queue redisson_lock_queue:{N}
-- KEYS[3]  the timeouts redisson_lock_timeout:{N}
-- KEYS[4]  the handoff registrations lockwarden_fair_handoff:{N}
-- ARGV[1]  owner id O
-- ARGV[2]  wait window in milliseconds
-- ARGV[3]  message published to the new head ("0")
-- ARGV[4]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[5]  the unlock channel redisson_lock__channel:{N}; the new head W is told on <channel>:W
-- ARGV[6]  "1" when the caller holds none of O's holds: a single hold of O found on the lock is then a
--          handoff to O (fair_release.lua) that O's caller gave up before it learnt of it, and is
--          released; "0" leaves the lock alone
-- Every waiter behind O moves up one place, so its score moves back by one wait window (but not below
-- now + that window). When O was at
-- the head and the lock is free, or when O's unclaimed handoff was released, the new head is told at
-- once instead of waiting out its timeout.
-- Returns 1 when O was queued or an unclaimed handoff was released, 0 otherwise.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local wrong = wrongType({[1] = 'hash', [2] = 'list', [3] = 'zset', [4] = 'hash'})
if wrong then
    return wrong
end
local queue = redis.call('lrange', KEYS[2], 0, -1)
local pos = 0
for i = 1, #queue do
    if queue[i] == ARGV[1] then
        pos = i
        break
    end
end
local window = tonumber(ARGV[2])
if pos > 0 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for i = pos + 1, #queue do
        if queue[i] ~= ARGV[1] then
            -- One window back, but never below now + window: a deadline that a live waiter keeps
            -- fresh is about that far ahead (fair_acquire.lua).
            local score = redis.call('zscore', KEYS[3], queue[i])
            if score then
                score = tonumber(score)
                local moved = math.max(score - window, math.min(score, now + window))
                if moved ~= score then
                    redis.call('zadd', KEYS[3], moved, queue[i])
                end
            end
        end
    end
    redis.call('lrem', KEYS[2], 0, ARGV[1])
end
local scored = redis.call('zrem', KEYS[3], ARGV[1]) == 1
redis.call('hdel', KEYS[4], ARGV[1])
local unclaimed = false
if pos == 0 and ARGV[6] == '1' and redis.call('hget', KEYS[1], ARGV[1]) == '1' then
    redis.call('del', KEYS[1])
    unclaimed = true
end
if (pos == 1 or unclaimed) and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[4], ARGV[5] .. ':' .. head, ARGV[3])
    end
end
if pos > 0 or scored or unclaimed then
    return 1
end
return 0
