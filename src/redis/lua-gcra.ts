import type { RedisLimit } from './redis-limits.js';
import { LUA_PUSH_LATE, luaPushDecision } from './script-reply.js';

/**
 * The GCRA script: every limit of a plan is GCRA (a plan has one algorithm), so the script is
 * generated with each limit's constants written into straight-line code: no tables of limits, no
 * functions per algorithm. With 32 decisions a call, the generic form cost Redis 137-139 us a call
 * and this one's predecessor 106-108 (INFO commandstats, alternating runs): what a decision costs
 * on Redis is what 64 calls in flight can reach.
 *
 * A limit's state is its TAT in whole µs plus a fraction in units of 1/k µs ("tat" or
 * "tat:frac:k"); its debt `d` in units is (tat - now) * k + frac, 0 when past. A request of cost
 * c passes when d + c * T <= tau (T the interval, tau = burst * T, both in units), and never when
 * c > burst. Written under another rule (another k), the fraction is read in ours, rounded up:
 * never less debt. Arguments and reply: limits-script.ts.
 */
export function gcraScript(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[]): string {
  const nl = keyLimits.length;
  const all = [...keyLimits, ...global];
  const lines: string[] = [];
  const emit = (s: string): void => {
    lines.push(s);
  };
  /** Limit i's constants: k, T, tau, burst. */
  const c = (i: number) => {
    const [k, T, tau, burst] = (all[i] as RedisLimit).args;
    return { k, T, tau, burst };
  };
  /** Limit i's key in decision j (0-based): the key's own, or the cap's after every decision's. */
  const keyOf = (i: number): string => (i < nl ? `KEYS[j * ${nl} + ${i + 1}]` : `KEYS[nd * ${nl} + ${i - nl + 1}]`);

  emit(`local function debt(key, k)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local i = string.find(v, ':', 1, true)
  local d
  if i then
    local j = string.find(v, ':', i + 1, true)
    local frac = tonumber(string.sub(v, i + 1, j - 1))
    local stored = tonumber(string.sub(v, j + 1))
    if stored ~= k then frac = math.ceil(frac * k / stored) end
    d = (tonumber(string.sub(v, 1, i - 1)) - now) * k + frac
  else
    d = (tonumber(v) - now) * k
  end
  if d < 0 then return 0 end
  return d
end
local function store(key, k, d)
  if d <= 0 then
    redis.call('DEL', key)
    return
  end
  local whole = math.floor(d / k)
  local frac = d - whole * k
  local v = string.format('%.0f', now + whole)
  if frac > 0 then v = v .. ':' .. string.format('%.0f', frac) .. ':' .. string.format('%.0f', k) end
  redis.call('SET', key, v, 'PX', math.max(1, math.ceil(d / k / 1000)))
end
local out = {}
for j = 0, nd - 1 do
  local cost, deadline, want = tonumber(arg()), tonumber(arg()), tonumber(arg())
  local n = #out
  if cost < 0 then`);
  // A refund of a spend at `deadline`: less what has drained since (with the spend gone, the debt
  // might have reached 0 meanwhile, and an idle stretch absorbs that much of it).
  all.forEach((_, i) => {
    const { k, T } = c(i);
    emit(`    do
      local back = -cost * ${T} - math.max(0, now - deadline) * ${k}
      if back > 0 then store(${keyOf(i)}, ${k}, debt(${keyOf(i)}, ${k}) - back) end
    end`);
  });
  emit(`    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = 0, 0, 0, 0, 0, 0
  elseif deadline > 0 and now > deadline then
    ${LUA_PUSH_LATE}
  else`);
  all.forEach((_, i) => {
    emit(`    local d${i} = debt(${keyOf(i)}, ${c(i).k})`);
  });
  // The key's limits first; the cap only when they allow; a probe (cost 0) passes.
  emit(`    local status, wait = 0, 0
    if cost > 0 then
      local never, w = false, 0`);
  const refusals = (from: number, to: number, indent: string): void => {
    for (let i = from; i < to; i++) {
      const { k, T, tau, burst } = c(i);
      emit(`${indent}if cost > ${burst} then never = true elseif d${i} + cost * ${T} > ${tau} then w = math.max(w, math.ceil((d${i} + cost * ${T} - ${tau}) / ${k})) end`);
    }
  };
  refusals(0, nl, '      ');
  emit(`      if never then status, wait = 2, -1 elseif w > 0 then status, wait = 1, w end`);
  if (global.length > 0) {
    emit(`      if status == 0 then`);
    refusals(nl, all.length, '        ');
    emit(`        if never then status, wait = 3, -1 elseif w > 0 then status, wait = 3, w end
      end`);
  }
  emit(`    end
    local spent = 0
    if status == 0 then
      spent = cost
      if want > cost then
        -- A lease: as much of want as every limit still holds (at least the cost, which passed).
        local room = want`);
  all.forEach((_, i) => {
    const { T, tau } = c(i);
    emit(`        room = math.min(room, math.floor((${tau} - d${i}) / ${T}))`);
  });
  emit(`        spent = math.max(cost, room)
      end
    end
    -- Remaining from what each limit holds after this decision (the cap's unless the key
    -- refused); reset and the refusal cache's block from the key's limits.
    local remaining, reset, blocked = math.huge, 0, 0`);
  all.forEach((_, i) => {
    const { k, T, tau } = c(i);
    const indent = i < nl ? '    ' : '      ';
    if (i === nl) emit(`    if status ~= 1 and status ~= 2 then`);
    emit(`${indent}remaining = math.min(remaining, math.floor((${tau} - d${i} - spent * ${T}) / ${T}))`);
    if (i < nl) {
      emit(`    reset = math.max(reset, math.ceil((d${i} + spent * ${T}) / ${k}))
    if d${i} + (spent + 1) * ${T} > ${tau} then blocked = math.max(blocked, math.ceil((d${i} + (spent + 1) * ${T} - ${tau}) / ${k})) end`);
    }
  });
  if (global.length > 0) emit(`    end`);
  emit(`    if remaining < 0 then remaining = 0 end
    if spent > 0 then`);
  all.forEach((_, i) => {
    const { k, T } = c(i);
    emit(`      store(${keyOf(i)}, ${k}, d${i} + spent * ${T})`);
  });
  emit(`    end
${luaPushDecision('spent', '    ')}
  end
end
`);
  if (global.length > 0) emit(`-- The cap after the whole batch: how long it refuses every request.
local capBlocked = 0`);
  for (let i = nl; i < all.length; i++) {
    const { k, T, tau } = c(i);
    emit(`do
  local d = debt(KEYS[nd * ${nl} + ${i - nl + 1}], ${k})
  if d + ${T} > ${tau} then capBlocked = math.max(capBlocked, math.ceil((d + ${T} - ${tau}) / ${k})) end
end`);
  }
  return lines.join('\n');
}
