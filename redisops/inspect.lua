-- inspect.lua: a consistent, read-only snapshot of everything stored under the name N, whoever wrote
-- it (lockwarden, Redisson or another client of Redisson's layout). It changes nothing.
-- KEYS[1]  N: the lock hash, or the string of a semaphore's permits or a latch's count
-- KEYS[2]  the fair lock's queue redisson_lock_queue:{N}
-- KEYS[3]  the fair lock's waiter timeouts redisson_lock_timeout:{N}
-- KEYS[4]  the fencing-token counter redisson_lock_token:{N}
-- KEYS[5]  the permit semaphore's acquired permits {N}:timeout
-- KEYS[6]  the read-write lock's write intent lockwarden_write_intent:{N}
-- ARGV[1]  the prefix of N's suffixed keys, "{N}:" (or "N:" when N carries a hash tag)
-- ARGV[2]  the most entries to return of each list (fields, queue, permits)
-- Returns {type of N, pttl of N, N's contents, queue, queue timeouts, token, permits,
--          number of permits, write intent, read timeouts, mode, {fields of N, length of the queue}}:
--   N's contents: for a hash, its fields and values, flat (at most ARGV[2] pairs); for a string, its
--   value; else nothing;
--   queue: the owners in order; queue timeouts: owner, score pairs (client epoch ms), flat;
--   permits: member, score pairs, flat (members are Redisson's 16 raw bytes);
--   read timeouts: for each reader field O with count c of a hash that has a mode field, O followed
--   by the PTTL of each of its c timeout keys {N}:O:rwlock_timeout:k (k = 1..c), as {O, pttl...};
--   mode: the hash's mode field, or "" (also when the fields returned are cut short).
local limit = tonumber(ARGV[2])
local kind = redis.call('type', KEYS[1])['ok']
local contents, reads, mode, n, queued = {}, {}, '', 0, 0
if kind == 'hash' then
    n = redis.call('hlen', KEYS[1])
    mode = redis.call('hget', KEYS[1], 'mode') or ''
    if n <= limit then
        contents = redis.call('hgetall', KEYS[1])
    else
        local cursor = '0'
        repeat
            local page = redis.call('hscan', KEYS[1], cursor, 'count', limit)
            cursor = page[1]
            for i = 1, #page[2] do
                if #contents < 2 * limit then
                    contents[#contents + 1] = page[2][i]
                end
            end
        until cursor == '0' or #contents >= 2 * limit
    end
    if mode ~= '' then
        for i = 1, #contents, 2 do
            local field, count = contents[i], tonumber(contents[i + 1])
            if field ~= 'mode' and count and string.sub(field, -6) ~= ':write' then
                local entry = {field}
                for k = 1, math.min(count, limit) do
                    entry[#entry + 1] = redis.call('pttl', ARGV[1] .. field .. ':rwlock_timeout:' .. string.format('%d', k))
                end
                reads[#reads + 1] = entry
            end
        end
    end
elseif kind == 'string' then
    contents = {redis.call('get', KEYS[1])}
end
local queue, timeouts = {}, {}
if redis.call('type', KEYS[2])['ok'] == 'list' then
    queue = redis.call('lrange', KEYS[2], 0, limit - 1)
    queued = redis.call('llen', KEYS[2])
end
if redis.call('type', KEYS[3])['ok'] == 'zset' then
    timeouts = redis.call('zrange', KEYS[3], 0, limit - 1, 'withscores')
end
local token = ''
if redis.call('type', KEYS[4])['ok'] == 'string' then
    token = redis.call('get', KEYS[4])
    -- An expiring counter (lockwarden's default) holds the value above the last token issued (see
    -- issueToken in lib.lua); one kept forever (persistent tokens, Redisson's RFencedLock) holds it.
    if tonumber(token) and redis.call('pttl', KEYS[4]) > 0 then
        token = string.format('%d', tonumber(token) - 1)
    end
end
local permits, npermits = {}, 0
if redis.call('type', KEYS[5])['ok'] == 'zset' then
    permits = redis.call('zrange', KEYS[5], 0, limit - 1, 'withscores')
    npermits = redis.call('zcard', KEYS[5])
end
local intent = ''
if redis.call('type', KEYS[6])['ok'] == 'string' then
    intent = redis.call('get', KEYS[6])
end
return {kind, redis.call('pttl', KEYS[1]), contents, queue, timeouts, token, permits, npermits, intent, reads, mode, {n, queued}}
