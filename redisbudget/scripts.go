package redisbudget

import "github.com/redis/go-redis/v9"

// The scripts share these helpers. Every key of one API key lives under
// KEYS[1], a prefix with a {hash tag}, so that a cluster keeps them in one
// slot. Times are Redis TIME in milliseconds: the machines' clocks do not
// matter. Durations cross the wire as milliseconds, rates as per second.
//
// A failover may bring a primary whose clock differs from the old one's.
// A refill time stored ahead of TIME is set to now, so that a clock behind
// stalls no refill; a clock ahead ends leases early by the difference,
// which the client's renewals (a third of the lease time at the most)
// make good unless it exceeds most of the lease time.
const luaPrelude = `
local p = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = 86400000

local function touch(k)
  redis.call('PEXPIRE', k, keep)
end

local function tokens_of(name, rate, size)
  local h = redis.call('HMGET', p .. ':lv:' .. name, 't', 'a')
  local tokens = tonumber(h[1]) or size
  local at = tonumber(h[2]) or now
  if at > now then
    at = now
    redis.call('HSET', p .. ':lv:' .. name, 'a', now)
  end
  if now > at then tokens = tokens + rate * (now - at) / 1000 end
  return math.min(size, tokens)
end

local function save(name, tokens)
  local k = p .. ':lv:' .. name
  redis.call('HSET', k, 't', tostring(tokens), 'a', now)
  touch(k)
end

-- paced_of is what the pace of a level lets go now ('pt' at 'pa'), at
-- its rate, up to its burst.
local function paced_of(name, pace, burst)
  local h = redis.call('HMGET', p .. ':lv:' .. name, 'pt', 'pa')
  local tokens = tonumber(h[1]) or burst
  local at = math.min(tonumber(h[2]) or now, now)
  return math.min(burst, tokens + pace * (now - at) / 1000)
end

local function levels_from(first, n)
  local out = {}
  for i = 0, n - 1 do
    local b = first + i * 6
    out[#out + 1] = {name = ARGV[b], amount = tonumber(ARGV[b + 1]), rate = tonumber(ARGV[b + 2]), size = tonumber(ARGV[b + 3]),
      pace = tonumber(ARGV[b + 4]), burst = tonumber(ARGV[b + 5])}
  end
  return out
end

-- members counts the processes heard from within ttl ms, me among them
-- (me may be empty), and says me's place among them by name.
local function members(me, ttl)
  local k = p .. ':procs'
  if me ~= '' then redis.call('HSET', k, me, now) end
  local h = redis.call('HGETALL', k)
  local ids = {}
  for i = 1, #h, 2 do
    if now - tonumber(h[i + 1]) > ttl then
      redis.call('HDEL', k, h[i])
    else
      ids[#ids + 1] = h[i]
    end
  end
  touch(k)
  table.sort(ids)
  local rank = 0
  for i, id in ipairs(ids) do
    if id == me then rank = i - 1 end
  end
  return #ids, rank
end

-- gone holds the leases released in the last two minutes: a release sent
-- again, or an Acquire that arrives after the release of its lease, does
-- nothing more.
local function gone(id)
  redis.call('ZREMRANGEBYSCORE', p .. ':gone', '-inf', now)
  return redis.call('ZSCORE', p .. ':gone', id)
end

local function drop_lease(id)
  local d = redis.call('HGETALL', p .. ':lease:' .. id)
  for i = 1, #d, 2 do
    redis.call('HINCRBYFLOAT', p .. ':inflight', d[i], -tonumber(d[i + 1]))
  end
  redis.call('DEL', p .. ':lease:' .. id)
  redis.call('ZREM', p .. ':leases', id)
end

-- the AIMD state, raised by one step per quiet interval since its last change;
-- the steps mirror bodo's quietInterval (2 s), paceStep (0.1), minPace (0.05)
-- and cutSpacing (1 s)
local function aimd(maxinflight)
  local s = redis.call('HMGET', p .. ':state', 'cap', 'pace', 'lc')
  local cap = tonumber(s[1]) or maxinflight
  local pace = tonumber(s[2]) or 1
  local lc = math.min(tonumber(s[3]) or now, now)
  local steps = math.floor((now - lc) / 2000)
  if steps > 0 then
    cap = cap + steps
    pace = pace + 0.1 * steps
    lc = lc + steps * 2000
  end
  return math.max(1, math.min(cap, maxinflight)), math.min(1, pace), lc
end

local function save_aimd(cap, pace, lc)
  redis.call('HSET', p .. ':state', 'cap', tostring(cap), 'pace', tostring(pace), 'lc', lc)
  touch(p .. ':state')
end
`

// acquireScript admits one attempt or says why not.
// ARGV: lease, ttl ms, cost, key rate, max in flight, refusal limit,
// refusal window ms, unbudgeted (0/1), process, process ttl ms, number of
// levels, then per level name, amount, rate, size, pace, burst. It
// answers {admitted (0/1), wait ms, reason, policy, ms until reset, ttl
// ms, processes, rank, refusal (0/1)}: a reason when not admitted (a
// level's name also when its pace holds the call), a policy for an
// exhausted quota, refusal when the level that holds it owes what a
// refusal asked (its 'ru', set by an owe, is still to come). A
// lease already admitted is admitted again without taking anything; a
// lease already released is not.
var acquireScript = redis.NewScript(luaPrelude + `
local lease = ARGV[1]
local ttl = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local keyrate = tonumber(ARGV[4])
local maxinflight = tonumber(ARGV[5])
local rlimit = tonumber(ARGV[6])
local rwindow = tonumber(ARGV[7])
local unbudgeted = ARGV[8] == '1'
local n, rank = members(ARGV[9], tonumber(ARGV[10]))
local levels = levels_from(12, tonumber(ARGV[11]))
local function no(wait, reason, policy, untilms, refusal)
  return {0, wait, reason, policy or '', untilms or 0, ttl, n, rank, refusal and 1 or 0}
end

for _, id in ipairs(redis.call('ZRANGEBYSCORE', p .. ':leases', '-inf', now)) do
  drop_lease(id)
end
redis.call('ZREMRANGEBYSCORE', p .. ':refusals', '-inf', now - rwindow)
if gone(lease) then
  return no(0, 'released')
end
if redis.call('ZSCORE', p .. ':leases', lease) then
  redis.call('ZADD', p .. ':leases', now + ttl, lease)
  return {1, 0, '', '', 0, ttl, n, rank, 0}
end

local blocks = {'*'}
for _, l in ipairs(levels) do blocks[#blocks + 1] = l.name end
for _, name in ipairs(blocks) do
  local untilms = tonumber(redis.call('HGET', p .. ':blocks', name))
  if untilms and untilms > now then
    return no(0, 'quota', name, untilms - now)
  end
end

local paused = tonumber(redis.call('HGET', p .. ':state', 'paused')) or 0
if paused > now then
  return no(paused - now, 'lockout')
end

local leases = redis.call('ZCARD', p .. ':leases')
local refusals = redis.call('ZCARD', p .. ':refusals')
if refusals + leases >= rlimit then
  local wait = 0
  if refusals > 0 then
    local oldest = redis.call('ZRANGE', p .. ':refusals', 0, 0, 'WITHSCORES')
    wait = tonumber(oldest[2]) + rwindow - now
  end
  return no(math.max(wait, 0), 'refusal-guard')
end

if not unbudgeted then
  local cap, pace, lc = aimd(maxinflight)
  if leases >= math.floor(cap) then
    save_aimd(cap, pace, lc)
    return no(0, 'in-flight')
  end
  local wait, reason, refusal = 0, '', false
  for _, l in ipairs(levels) do
    l.tokens = tokens_of(l.name, l.rate, l.size)
    -- A call bigger than the level goes when it is full, into debt.
    local need = math.min(l.amount, l.size)
    if l.tokens < need - 1e-9 then
      local w = 3600000
      if l.rate > 0 then w = math.min(3600000, math.ceil((need - l.tokens) / l.rate * 1000)) end
      if w > wait then
        wait, reason = w, l.name
        refusal = (tonumber(redis.call('HGET', p .. ':lv:' .. l.name, 'ru')) or 0) > now
      end
    end
    -- A paced level holds a call until its pace has the call's amount
    -- (at most its burst).
    if l.pace > 0 and l.burst > 0 then
      l.paced = paced_of(l.name, l.pace, l.burst)
      local need = math.min(l.amount, l.burst)
      if l.paced < need - 1e-9 then
        local w = math.min(3600000, math.ceil((need - l.paced) / l.pace * 1000))
        if w > wait then wait, reason, refusal = w, l.name, false end
      end
    end
  end
  local pt, pa
  if pace < 1 then
    local pr = pace * keyrate
    local burst = math.max(pr * 2, 1)
    local s = redis.call('HMGET', p .. ':state', 'pt', 'pa')
    pt = tonumber(s[1]) or burst
    pa = tonumber(s[2]) or now
    if pa > now then
      pa = now
      redis.call('HSET', p .. ':state', 'pa', now)
    end
    if now > pa then pt = math.min(burst, pt + pr * (now - pa) / 1000) end
    local need = math.min(cost, burst)
    if pt < need - 1e-9 and pr > 0 then
      local w = math.min(3600000, math.ceil((need - pt) / pr * 1000))
      if w > wait then wait, reason, refusal = w, 'pace', false end
    end
  end
  save_aimd(cap, pace, lc)
  if wait > 0 then
    return no(wait, reason, nil, nil, refusal)
  end
  for _, l in ipairs(levels) do
    save(l.name, l.tokens - l.amount)
    if l.paced then
      redis.call('HSET', p .. ':lv:' .. l.name, 'pt', tostring(l.paced - l.amount), 'pa', now)
    end
    redis.call('HINCRBYFLOAT', p .. ':inflight', l.name, l.amount)
    redis.call('HSET', p .. ':lease:' .. lease, l.name, tostring(l.amount))
  end
  touch(p .. ':inflight')
  if pace < 1 then
    redis.call('HSET', p .. ':state', 'pt', tostring(pt - cost), 'pa', now)
  end
end
redis.call('ZADD', p .. ':leases', now + ttl, lease)
-- the lease's amounts live as long as the other keys: only the ZSET
-- entry expires the lease, and drop_lease still finds what to take back
touch(p .. ':lease:' .. lease)
touch(p .. ':leases')
return {1, 0, '', '', 0, ttl, n, rank, 0}
`)

// releaseScript ends an attempt; a release of a lease released already
// does nothing. ARGV: lease, refused (0/1), cut (0/1), refusal window ms,
// max in flight, pause ms, block policy, block ms, cut factor, ms since
// the refusal, then three lists, each a count followed by name, amount,
// rate, size, pace, burst per level: refund, left, owe.
var releaseScript = redis.NewScript(luaPrelude + `
local lease = ARGV[1]
local refused = ARGV[2] == '1'
local cut = ARGV[3] == '1'
local rwindow = tonumber(ARGV[4])
local maxinflight = tonumber(ARGV[5])
local pausems = tonumber(ARGV[6])
local block = ARGV[7]
local blockms = tonumber(ARGV[8])
local factor = tonumber(ARGV[9])
local ago = tonumber(ARGV[10])
local i = 11
local nref = tonumber(ARGV[i]); local refund = levels_from(i + 1, nref); i = i + 1 + nref * 6
local nleft = tonumber(ARGV[i]); local left = levels_from(i + 1, nleft); i = i + 1 + nleft * 6
local nowe = tonumber(ARGV[i]); local owe = levels_from(i + 1, nowe)

if gone(lease) then
  return 0
end
drop_lease(lease)
redis.call('ZADD', p .. ':gone', now + 120000, lease)
touch(p .. ':gone')
if refused and ago < rwindow then
  redis.call('ZADD', p .. ':refusals', now - ago, now .. ':' .. lease)
  redis.call('ZREMRANGEBYSCORE', p .. ':refusals', '-inf', now - rwindow)
  touch(p .. ':refusals')
end
for _, l in ipairs(refund) do
  save(l.name, math.min(l.size, tokens_of(l.name, l.rate, l.size) + l.amount))
end
for _, l in ipairs(left) do
  local inflight = tonumber(redis.call('HGET', p .. ':inflight', l.name)) or 0
  save(l.name, math.min(tokens_of(l.name, l.rate, l.size), l.amount - inflight))
end
-- a level owing what a refused call lacked: until it has refilled to
-- zero, its wait is the refusal's ('ru')
for _, l in ipairs(owe) do
  save(l.name, math.min(tokens_of(l.name, l.rate, l.size), l.amount))
  if l.amount < 0 and l.rate > 0 then
    local k = p .. ':lv:' .. l.name
    local ru = now + math.ceil(-l.amount / l.rate * 1000)
    redis.call('HSET', k, 'ru', math.max(tonumber(redis.call('HGET', k, 'ru')) or 0, ru))
  end
end
if cut then
  local lastcut = tonumber(redis.call('HGET', p .. ':state', 'lcut'))
  if not lastcut or now - lastcut >= 1000 then
    local cap, pace, lc = aimd(maxinflight)
    if pace >= 1 then redis.call('HDEL', p .. ':state', 'pt', 'pa') end
    save_aimd(math.max(1, math.floor(cap * factor)), math.max(0.05, pace * factor), now)
    redis.call('HSET', p .. ':state', 'lcut', now)
  end
end
if pausems > 0 then
  local paused = tonumber(redis.call('HGET', p .. ':state', 'paused')) or 0
  redis.call('HSET', p .. ':state', 'paused', math.max(paused, now + pausems))
  touch(p .. ':state')
end
if block ~= '' and blockms > 0 then
  local untilms = tonumber(redis.call('HGET', p .. ':blocks', block)) or 0
  redis.call('HSET', p .. ':blocks', block, math.max(untilms, now + blockms))
  touch(p .. ':blocks')
end
return 1
`)

// refundScript gives amounts back. ARGV: count, then name, amount, rate,
// size, pace, burst per level.
var refundScript = redis.NewScript(luaPrelude + `
for _, l in ipairs(levels_from(2, tonumber(ARGV[1]))) do
  save(l.name, math.min(l.size, tokens_of(l.name, l.rate, l.size) + l.amount))
end
return 1
`)

// renewScript keeps leases in flight and counts the process. ARGV:
// process, process ttl ms, lease ttl ms, then the leases. A lease the
// store no longer holds is not made again. It answers {processes, rank}.
var renewScript = redis.NewScript(luaPrelude + `
local n, rank = members(ARGV[1], tonumber(ARGV[2]))
local ttl = tonumber(ARGV[3])
for i = 4, #ARGV do
  redis.call('ZADD', p .. ':leases', 'XX', now + ttl, ARGV[i])
end
return {n, rank}
`)
