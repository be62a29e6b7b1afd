-- fair_acquire.lua: one attempt at the fair lock N for owner O (Redisson RFairLock): take or re-enter
-- the lock and issue a fencing token, or take (or keep) O's place in the queue of waiters.
-- KEYS[1]  the lock hash N (field O -> hold count)
-- KEYS[2]  the queue redisson_lock_queue:{N} (LIST of waiting owners, head first)
-- KEYS[3]  the timeouts redisson_lock_timeout:{N} (ZSET owner -> absolute ms after which it is gone)
-- KEYS[4]  the fencing token counter redisson_lock_token:{N}
-- KEYS[5]  the handoff registrations lockwarden_fair_handoff:{N} (HASH owner -> "lease:window:wait id",
--          lease and window in ms): queued waiters to which a release may hand the lock straight away
--          (fair_release.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- ARGV[3]  the hold count O had before this acquisition as far as the caller knows, or -1 if unknown.
--          When O's count is already above it, this call is a retry of one whose reply was lost:
--          it answers without taking a second hold, with a fresh token.
-- ARGV[4]  wait window in milliseconds: how long a queued waiter may stay silent before it is purged
-- ARGV[5]  "1" to queue O when the lock is not obtained, "0" for a single attempt that leaves no trace
-- ARGV[6]  "1" to register O, when it queues, for a handoff with lease ARGV[1] (and window ARGV[4]);
--          "0" not to (and to drop a registration it has)
-- ARGV[7]  the id of this wait, sent back in the grant notice so that O's process can tell which of
--          its calls the grant is for (and a stale notice of an earlier wait from a current one)
-- ARGV[8]  "1" when O keeps its place alive (fair_refresh.lua, about every third of its window): its
--          deadline is then now + ARGV[4] when it queues, and is raised to that when it tries again, so
--          that it lapses one window after O stopped; "0" for Redisson's deadline, the previous
--          waiter's (or the lock's expiry) + ARGV[4], which is never moved by trying again
-- ARGV[9]  message that tells a waiter it is at the head of the queue and the lock is free ("0")
-- ARGV[10] publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[11] the unlock channel redisson_lock__channel:{N}; the head waiter W is told on <channel>:W
-- ARGV[12] token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- Returns {1, holdCount, token} when O now holds the lock, or {0, ttl, watermark} when it does not: ttl
-- is how long O should wait at most before it tries again, in milliseconds, at least 1 (-1 only for a
-- single attempt on a lock without expiry, as acquire.lua answers): the lock's PTTL while it is held.
-- watermark is at least every fencing token issued on N so far, and below every token issued later:
-- a grant notice whose token is not above it was sent before this call ran, and is stale.
-- The clock is the server's (TIME), so clients with skewed clocks agree on the scores.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local refused = wrongType({[1] = 'hash', [2] = 'list', [3] = 'zset', [4] = 'string', [5] = 'hash'}) or kindMismatch(ARGV[2], false)
if refused then
    return refused
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The watermark of a refusal (see Returns): the counter, which every later token is above (issued
-- from it, or one taken from the clock once it has expired, which it does only after the clock has passed
-- it: see issueToken); with expiring tokens and no counter, the clock, which every token of an expired
-- counter is below and every later one is at least.
local function watermark()
    local counter = tonumber(redis.call('get', KEYS[4]) or '')
    if counter or tonumber(ARGV[12]) == 0 then
        return counter or 0
    end
    return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local window = tonumber(ARGV[4])

-- Purge the waiters at the head whose window has passed (or that have no score at all).
purgeLapsed(KEYS[2], KEYS[3], KEYS[5], now)

-- Retry of a call that took the lock, or re-entry.
local current = redis.call('hget', KEYS[1], ARGV[2])
if current then
    current = tonumber(current)
    local expected = tonumber(ARGV[3])
    if expected >= 0 and current > expected then
        redis.call('pexpire', KEYS[1], ARGV[1])
        -- A fresh token, never the counter's value: the hold found may also be a dead one of the
        -- owner's, lost to the caller (its Done closed) while Redis kept it (a renewal that took
        -- effect although its answer was lost), which the caller failed to clear; answering the
        -- counter gave it that hold's token a second time. The token of a lost reply was never seen,
        -- so a fresh one costs nothing but a gap.
        return {1, current, issueToken(KEYS[4], ARGV[12])}
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], '1')
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, count, issueToken(KEYS[4], ARGV[12])}
end

local locked = redis.call('exists', KEYS[1]) == 1
local head = redis.call('lindex', KEYS[2], 0)

-- The lock is free and O is first in line: take it and move every remaining waiter up one window.
if not locked and (not head or head == ARGV[2]) then
    if head then
        redis.call('lpop', KEYS[2])
    end
    redis.call('hdel', KEYS[5], ARGV[2])
    if redis.call('zrem', KEYS[3], ARGV[2]) == 1 then
        -- Every remaining deadline moves back one window, as in Redisson, but never below
        -- now + window: a deadline that a live waiter keeps fresh (ARGV[8]) is about that far ahead.
        shiftDeadlines(KEYS[3], window, now)
    end
    redis.call('hset', KEYS[1], ARGV[2], '1')
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1, issueToken(KEYS[4], ARGV[12])}
end

local pttl = redis.call('pttl', KEYS[1])

-- The lock is free but another waiter is at the head: tell it. Nothing else may: it can have become
-- the head by a purge, or by the expiry of a lease (neither publishes), or have missed the notice of
-- the release (a pub/sub reconnect), and its process need not try it before the others (its local
-- order can differ from the queue's after a place lapsed and was taken again at the tail).
if not locked and head then
    redis.call(ARGV[10], ARGV[11] .. ':' .. head, ARGV[9])
end

-- A single attempt: answer without queueing O.
if ARGV[5] ~= '1' then
    if locked then
        if pttl == -1 then
            return {0, -1, watermark()}
        end
        return {0, math.max(pttl, 1), watermark()}
    end
    return {0, math.max(tonumber(redis.call('zscore', KEYS[3], head)) - now, 1), watermark()}
end

-- Already queued: keep O's place and score.
-- The answer of a queued waiter is when to look again if no notice comes: when the lock expires (a
-- lease that runs out publishes nothing), or soon when the lock is free but another waiter is at the
-- head (it should take the lock at once; if it is dead, its deadline purges it). The deadline stored
-- in the zset is another matter: it says when the waiter counts as gone.
local function retryHint(fallback)
    if locked and pttl >= 0 then
        -- PTTL is 0 in the last millisecond of a lease.
        return math.max(pttl, 1)
    end
    if not locked and head then
        local headScore = tonumber(redis.call('zscore', KEYS[3], head) or now)
        return math.max(math.min(headScore - now, 1000), 1)
    end
    return math.max(fallback, 1)
end

-- The handoff registration follows O's place: it expires with the last waiter's deadline.
local function register(deadline)
    if ARGV[6] == '1' then
        redis.call('hset', KEYS[5], ARGV[2], ARGV[1] .. ':' .. ARGV[4] .. ':' .. ARGV[7])
        -- (At least a second: a waiter past its deadline but not purged yet must not expire the rest.)
        local keep = math.max(deadline - now, 1000)
        if redis.call('pttl', KEYS[5]) < keep then
            redis.call('pexpire', KEYS[5], keep)
        end
    else
        redis.call('hdel', KEYS[5], ARGV[2])
    end
end

local alive = ARGV[8] == '1'
local score = redis.call('zscore', KEYS[3], ARGV[2])
if score then
    score = tonumber(score)
    if alive and score < now + window then
        score = now + window
        redis.call('zadd', KEYS[3], score, ARGV[2])
    end
    register(score)
    return {0, retryHint(score - window - now), watermark()}
end

-- Append O. A waiter that keeps its place alive gets one window from now: its deadline says when it
-- counts as gone, and does not add up the windows of the waiters ahead (dead ones included) nor the
-- holder's lease. Otherwise, as in Redisson, its window starts when its predecessor's ends (or when
-- the lease of the lock runs out).
local ttl = 0
if not alive then
    local last = redis.call('lindex', KEYS[2], -1)
    local lastScore = last and redis.call('zscore', KEYS[3], last)
    if lastScore then
        ttl = tonumber(lastScore) - now
    elseif pttl > 0 then
        ttl = pttl
    end
end
redis.call('zadd', KEYS[3], now + ttl + window, ARGV[2])
redis.call('rpush', KEYS[2], ARGV[2])
register(now + ttl + window)
return {0, retryHint(ttl), watermark()}
