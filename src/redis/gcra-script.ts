import { createHash } from 'node:crypto';

/**
 * The GCRA decision on Redis, as one Lua script: a batch of decisions, each over every limit of
 * one key (and the global cap's, on the same server), each atomic (Redis runs a script alone).
 *
 * Time is Redis's own (`TIME`, microseconds), so no client clock can mint quota. A limit's state
 * is its theoretical arrival time (TAT) in whole microseconds plus a fraction in units of
 * 1/k microsecond, where k is chosen per limit so that its emission interval T is a whole number
 * of units (src/redis/redis-limits.ts): every sum is an exact integer below 2^53, so the script
 * admits exactly what the shared-memory GCRA admits. Stored as "tat" or "tat:frac:k".
 *
 * A decision is refused without writing anything; a probe (cost 0) writes nothing; an admission
 * writes every limit's new TAT with `PX` until its debt is paid, so a key expires exactly when
 * its state equals a fresh key's. A decision that reaches Redis after its deadline (on Redis's
 * clock, see redis-rate-limiter.ts) writes nothing and answers LATE.
 *
 * ARGV: nKeyLimits, nGlobalLimits, then per limit (key limits, then global): k, T, tau (the
 * tolerance, burst * T), burst; then nDecisions, then per decision: cost, deadline (µs on
 * Redis's clock, 0: none). KEYS: per decision its nKeyLimits keys, then the global limits' keys.
 * Returns per decision [status, remaining, retryAfterUs, resetAfterUs], then Redis's time in µs.
 */
export const GCRA_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nl = tonumber(ARGV[1])
local ng = tonumber(ARGV[2])
local lim = {}
local a = 3
for i = 1, nl + ng do
  lim[i] = { tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]) }
  a = a + 4
end
local nd = tonumber(ARGV[a])
a = a + 1
local out = {}
local debts = {}
local keys = {}
local function debtOf(key, k)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local i = string.find(v, ':', 1, true)
  local tat, frac = 0, 0
  if i then
    local j = string.find(v, ':', i + 1, true)
    tat = tonumber(string.sub(v, 1, i - 1))
    frac = tonumber(string.sub(v, i + 1, j - 1))
    local stored = tonumber(string.sub(v, j + 1))
    -- Written under another rule: the fraction in our units, rounded up (never less debt).
    if stored ~= k then frac = math.ceil(frac * k / stored) end
  else
    tat = tonumber(v)
  end
  local d = (tat - now) * k + frac
  if d < 0 then return 0 end
  return d
end
for j = 0, nd - 1 do
  local cost = tonumber(ARGV[a])
  local deadline = tonumber(ARGV[a + 1])
  a = a + 2
  if deadline > 0 and now > deadline then
    out[#out + 1] = 4
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
  else
    local keyRefused, keyNever, keyWait = false, false, 0
    local capRefused, capNever, capWait = false, false, 0
    for i = 1, nl + ng do
      local key
      if i <= nl then key = KEYS[j * nl + i] else key = KEYS[nd * nl + i - nl] end
      keys[i] = key
      local L = lim[i]
      local k, T, tau, burst = L[1], L[2], L[3], L[4]
      local d = debtOf(key, k)
      debts[i] = d
      local after = d + cost * T
      if cost > burst or after > tau then
        local w = math.ceil((after - tau) / k)
        if i <= nl then
          keyRefused = true
          if cost > burst then keyNever = true else keyWait = math.max(keyWait, w) end
        else
          capRefused = true
          if cost > burst then capNever = true else capWait = math.max(capWait, w) end
        end
      end
    end
    -- As the shared-memory limiter answers: the key's limits first; the cap only when they allow.
    local status, wait, upto = 0, 0, nl + ng
    if keyRefused then
      status = keyNever and 2 or 1
      wait = keyNever and -1 or keyWait
      upto = nl
    elseif capRefused then
      status = 3
      wait = capNever and -1 or capWait
    end
    -- Remaining from what each limit holds after this decision (unspent if refused); reset from
    -- the key's limits.
    local remaining, reset = -1, 0
    for i = 1, upto do
      local L = lim[i]
      local k, T, tau = L[1], L[2], L[3]
      local d = debts[i]
      if status == 0 then d = d + cost * T end
      local r = math.floor((tau - d) / T)
      if r < 0 then r = 0 end
      if remaining < 0 or r < remaining then remaining = r end
      if i <= nl then reset = math.max(reset, math.ceil(d / k)) end
      if status == 0 and cost > 0 then
        local whole = math.floor(d / k)
        local frac = d - whole * k
        local v = string.format('%.0f', now + whole)
        if frac > 0 then v = v .. ':' .. string.format('%.0f', frac) .. ':' .. string.format('%.0f', k) end
        redis.call('SET', keys[i], v, 'PX', math.max(1, math.ceil(d / k / 1000)))
      end
    end
    out[#out + 1] = status
    out[#out + 1] = remaining
    out[#out + 1] = wait
    out[#out + 1] = reset
  end
end
out[#out + 1] = now
return out
`;

/** The script's SHA1, for EVALSHA. */
export const GCRA_SHA = createHash('sha1').update(GCRA_SCRIPT).digest('hex');

/** Decision statuses in the script's reply. */
export const ALLOWED = 0;
export const LIMITED = 1;
export const EXCEEDS_BURST = 2;
export const GLOBAL_LIMIT = 3;
export const LATE = 4;
