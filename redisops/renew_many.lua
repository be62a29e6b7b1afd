-- renew_many.lua: extend many watchdog holds in one call, each on its own as renew.lua,
-- rw_write_renew.lua or rw_read_renew.lua would: one hold's refusal leaves the others renewed. Every
-- key of one call is in one Redis Cluster slot. The holds come in three runs: p reentrant or fair
-- lock holds, then w write holds, then read holds, one owner argument each.
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  p, the number of reentrant or fair lock holds
-- ARGV[3]  w, the number of write holds
-- ARGV[3+i]  the owner id O of hold i, for i = 1, 2, ...
-- KEYS[i]  for a lock or write hold i, its lock hash N
-- KEYS[p+w+2j-1], KEYS[p+w+2j]  for the j-th read hold, its lock hash N and O's read timeout key
--          prefix {N}:O:rwlock_timeout (hold k has the key <prefix>:<k>)
-- Returns one integer per hold, in order: 1 when renewed; 0 when O no longer holds it (the hold is
-- lost), also when O's field in N is a hold of the other family of locks, as the single-hold scripts
-- answer; -1 when N holds another type than a hash (WRONGTYPE). A hold that does not answer 1 is left
-- unchanged.
-- lease is for comparisons; commands get ARGV[1] as it came: Redis turns a Lua number passed to a
-- command into text with a printf on every call, a third of what renewing a hold costs it.
local lease = tonumber(ARGV[1])
local p, w = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 1, p do
    local r = redis.pcall('hexists', KEYS[i], ARGV[3 + i])
    if r == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
    elseif type(r) == 'table' then
        r = -1
    end
    out[i] = r
end
for i = p + 1, p + w do
    local owner = ARGV[3 + i]
    local state = redis.pcall('hmget', KEYS[i], 'mode', owner .. ':write', owner)
    local r = 0
    if state.err then
        r = -1
    elseif state[1] == 'write' and state[2] then
        if not state[3] or redis.call('pttl', KEYS[i]) < lease then
            redis.call('pexpire', KEYS[i], ARGV[1])
        end
        r = 1
    end
    out[i] = r
end
for i = p + w + 1, #ARGV - 3 do
    local j = i - p - w
    local key, prefix, owner = KEYS[p + w + 2 * j - 1], KEYS[p + w + 2 * j], ARGV[3 + i]
    local state = redis.pcall('hmget', key, 'mode', owner)
    local r = 0
    if state.err then
        r = -1
    else
        local count = tonumber(state[2])
        if count and state[1] then
            r = 1
            for k = 1, count do
                if redis.call('type', prefix .. ':' .. string.format('%d', k)).ok ~= 'string' then
                    r = 0
                    break
                end
            end
            if r == 1 then
                for k = 1, count do
                    redis.call('pexpire', prefix .. ':' .. string.format('%d', k), ARGV[1])
                end
                if redis.call('pttl', key) < lease then
                    redis.call('pexpire', key, ARGV[1])
                end
            end
        end
    end
    out[i] = r
end
return out
