import type { RedisLimit } from './redis-limits.js';
import { LATE, LUA_DECISIONS_CLOSE, LUA_DECISIONS_OPEN, LUA_PUSH_LATE, luaPushDecision, luaReturnDecision } from './script-reply.js';

/**
 * The GCRA script: every limit of a plan is GCRA (a plan has one algorithm), so the script is
 * generated with each limit's constants written into straight-line code: no tables of limits, no
 * functions per algorithm, no helper functions at all (reading and writing a state are written
 * out per limit). With 32 decisions a call, the generic form cost Redis 137-139 us a call and
 * this one's predecessor 106-108 (INFO commandstats, alternating runs): what a decision costs on
 * Redis is what 64 calls in flight can reach.
 *
 * Two forms: a batch of decisions (its arguments packed in one string, read in a loop), and one
 * decision alone (`single`: its fields as arguments of their own, no loop, the reply made in one
 * table). One call at a time sends the second, and a round trip waits for every µs of it: a
 * decision alone cost Redis 6.2 us in the batch form before these changes, 5.5 in it now, and
 * 4.6-5.0 in the single form, of which TIME, GET and SET with PX alone take 4.3-4.4 (INFO
 * commandstats, one decision a call on keys that expired since, alternating runs). Arguments and
 * reply: limits-script.ts.
 *
 * A limit's state is its TAT in whole µs plus a fraction in units of 1/k µs ("tat" or
 * "tat:frac:k"); its debt `d` in units is (tat - now) * k + frac, 0 when past. A request of cost
 * c passes when d + c * T <= tau (T the interval, tau = burst * T, both in units), and never when
 * c > burst. Written under another rule (another k), the fraction is read in ours, rounded up:
 * never less debt. A whole TAT (every TAT under k = 1; under k > 1, one whose debt is a multiple
 * of k) is stored as the 8 bytes of its double (`struct.pack('>d')`, exact: an integer below
 * 2^53). Redis 7.0 turns a number handed to a command into text with snprintf("%.17g"), which
 * took 0.3 us of the 2.8 us a decision cost Redis in batches of 16 (INFO commandstats, 64 calls
 * in flight); packed, a decision cost 2.85 us of Redis's CPU against 3.26, and 64 calls in
 * flight reached 315-323k decisions/s against 282-291k (same runs, alternating).
 */
export function gcraScript(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[], single: boolean): string {
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
  /** Limit i's key (in decision j of a batch): the key's own, or the cap's after every decision's. */
  const keyOf = (i: number): string => {
    if (single) return `KEYS[${i + 1}]`;
    return i < nl ? `KEYS[j * ${nl} + ${i + 1}]` : `KEYS[nd * ${nl} + ${i - nl + 1}]`;
  };

  // One decision, written as a batch's loop body (indented for it: a single script's is moved
  // left after). Each field is a number to Lua's arithmetic (`+ 0`), which calls nothing:
  // tonumber, a function, cost Redis 0.2 us more a call for three.
  emit(single
    ? `  local cost, deadline, want = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0`
    : `local out = {}
${LUA_DECISIONS_OPEN}
  local cost, deadline, want = arg() + 0, arg() + 0, arg() + 0
  local n = #out`);
  // A single script for one key limit answers a plain admission with its debt after (`debt`).
  const debtForm = single && nl === 1 && global.length === 0;
  emit(`  local status, remaining, wait, reset, blocked, spent = 0, 0, 0, 0, 0, 0${debtForm ? '\n  local debt = 0' : ''}
  if cost < 0 then`);
  // A refund of the last -cost of a spend whose slot ended at `deadline` (µs; the cap's reply
  // gives it): what of it is still ahead of now. The spend's slot started where the debt then
  // ended, not at the spend's own time: a saturated cap did not drain while the spend was out,
  // so all of it that is still ahead comes back (found: refunds from the spend's time, as if
  // the cap had been idle, left a contended cap about 30% short). What has passed stays spent.
  // With want 1 (a spend's give-back, RedisCore.giveBackAt), `deadline` is the spend's own time,
  // where its slot began at the earliest: it ends at least -cost intervals later, under each
  // limit, and what of that is still ahead comes back; nothing when the key's reset mark (a
  // reset or block of the key: RESET_MARK) is at or after the spend's time.
  if (nl > 0) {
    emit(`    local forgotten = false
    if want == 1 then
      local mark = redis.call('GET', ${luaMarkKey(keyOf(0))})
      forgotten = mark ~= false and tonumber(mark) >= deadline
    end
    if not forgotten then`);
  }
  all.forEach((_, i) => {
    const { k, T } = c(i);
    emit(`    do
      local back = math.min(-cost * ${T}, (deadline - now) * ${k} + (want == 1 and -cost * ${T} or 0))
      if back > 0 then
${luaDebt('dr', keyOf(i), k, '        ')}
${luaStore(keyOf(i), k, 'dr - back', true, '        ')}
      end
    end`);
  });
  if (nl > 0) emit('    end');
  if (!single) emit('    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = 0, 0, 0, 0, 0, 0');
  emit(`  elseif deadline > 0 and now > deadline then
    ${single ? `status = ${LATE}` : LUA_PUSH_LATE}
  elseif want < 0 then`);
  // A per-key control (RedisCore.control), sent only with a plan of the key's own limits: a
  // penalty (want -1) spends `cost` intervals on each, beyond its burst; a block (want -2) raises
  // each one's debt to `cost` us plus its tolerance less one interval (a request of cost 1
  // passes when the block ends, none before), and never lowers it. Nothing else is read.
  keyLimits.forEach((_, i) => {
    const { k, T, tau } = c(i);
    emit(`    do
${luaDebt('dc', keyOf(i), k, '      ')}
      local target = dc + cost * ${T}
      if want == -2 then target = cost * ${k} + ${tau} - ${T} end
      if target > dc then
${luaStore(keyOf(i), k, 'target', false, '        ')}
      end
    end`);
  });
  // A block moves the key's reset mark to now: a give-back of a spend made before it gives
  // nothing (it would lower the block's debt). Kept as long as the longest of the key's limits'
  // states after the block, and of the mark itself: a spend made before the block ended its slot
  // by then, so a give-back after that gives nothing anyway (whatever rule it was spent under).
  if (nl > 0) {
    emit(`    if want == -2 then
${luaSetMark(luaMarkKey(keyOf(0)), `{ ${keyLimits.map((_, i) => keyOf(i)).join(', ')} }`, '      ')}
    end`);
  }
  if (!single) emit('    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = 0, 0, 0, 0, 0, 0');
  emit(`  else`);
  all.forEach((_, i) => emit(luaDebt(`d${i}`, keyOf(i), c(i).k, '    ')));
  // The key's limits first; the cap only when they allow; a probe (cost 0) passes.
  emit(`    if cost > 0 then
      local never, w = false, 0`);
  const refusals = (from: number, to: number, indent: string): void => {
    for (let i = from; i < to; i++) {
      const { k, T, tau, burst } = c(i);
      emit(`${indent}if cost > ${burst} then never = true ` +
        `elseif d${i} + cost * ${T} > ${tau} then w = math.max(w, ${ceilDiv(`d${i} + cost * ${T} - ${tau}`, k)}) end`);
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
    if status == 0 then
      spent = cost
      if want > cost then
        -- A lease: as much of want as every limit still holds (at least the cost, which passed).
        local room = want`);
  all.forEach((_, i) => {
    const { T, tau } = c(i);
    emit(`        room = math.min(room, ${floorDiv(`${tau} - d${i}`, T)})`);
  });
  // Remaining from what each limit holds after this decision (the cap's unless the key refused);
  // reset and the refusal cache's block from the key's limits. The first limit sets each (every
  // plan has a key limit, or only the cap's, which then always counts); the others lower or
  // raise it.
  emit(`        spent = math.max(cost, room)
      end
    end`);
  all.forEach((_, i) => {
    const { k, T, tau } = c(i);
    const indent = i < nl || nl === 0 ? '    ' : '      ';
    if (i === nl && nl > 0) emit(`    if status ~= 1 and status ~= 2 then`);
    const left = floorDiv(`${tau} - d${i} - spent * ${T}`, T);
    emit(i === 0 ? `${indent}remaining = ${left}` : `${indent}do local r = ${left}; if r < remaining then remaining = r end end`);
    if (i < nl || nl === 0) {
      // A plan of the cap alone (a Cluster's) reports the cap's reset: where its spend's slot
      // ends, which a refund of it needs.
      const r = ceilDiv(`d${i} + spent * ${T}`, k);
      emit(i === 0 ? `    reset = ${r}` : `    reset = math.max(reset, ${r})`);
    }
    if (i < nl) {
      const b = ceilDiv(`d${i} + (spent + 1) * ${T} - ${tau}`, k);
      emit(`    if d${i} + (spent + 1) * ${T} > ${tau} then blocked = ${i === 0 ? b : `math.max(blocked, ${b})`} end`);
    }
  });
  if (global.length > 0 && nl > 0) emit(`    end`);
  emit(`    if remaining < 0 then remaining = 0 end
    if spent > 0 then`);
  all.forEach((_, i) => {
    const { k, T } = c(i);
    emit(luaStore(keyOf(i), k, `d${i} + spent * ${T}`, false, '      '));
  });
  emit('    end');
  if (debtForm) emit(`    debt = d0 + spent * ${c(0).T}`);
  if (!single) emit(luaPushDecision('spent', '    '));
  emit('  end');
  if (single) lines.splice(0, lines.length, ...lines.join('\n').split('\n').map((line) => line.slice(2)));
  else emit(LUA_DECISIONS_CLOSE);
  if (global.length > 0) emit(`-- The cap after the whole batch: how long it refuses every request.
local capBlocked = 0`);
  for (let i = nl; i < all.length; i++) {
    const { k, T, tau } = c(i);
    emit(`do
${luaDebt('d', keyOf(i), k, '  ')}
  if d + ${T} > ${tau} then capBlocked = math.max(capBlocked, ${ceilDiv(`d + ${T} - ${tau}`, k)}) end
end`);
  }
  if (single) emit(luaReturnDecision('spent', debtForm ? 'debt' : null, global.length > 0 ? 'capBlocked, now' : 'now'));
  return lines.join('\n');
}

/**
 * The Redis key of a user key's reset mark, after its base (`prefix{tag}:`): the Redis time (µs)
 * of its latest reset or block (key-reset.ts, and a GCRA block here). A GCRA give-back of a spend
 * made at or before it gives nothing: a reset's fresh state (or a block's debt) holds only what
 * came after. It is kept as long as the longest of the key's states it covers would have lived
 * (each expires when its debt is paid: a spend counted there has ended its slot by then, and its
 * give-back gives nothing after that, whatever rule it was spent under), or its own earlier
 * expiry if that is later. No limit's suffix is this (redis-limits.ts).
 */
export const RESET_MARK = 'reset';

/**
 * Lua that sets the reset mark at `mark` to `now`, kept as long as the longest-lived of the keys
 * in the Lua table `keys` and of the mark itself (see RESET_MARK); nothing when none of them has
 * an expiry ahead. Run before the keys are deleted (a reset: key-reset.ts) or after they are
 * written (a block).
 */
export function luaSetMark(mark: string, keys: string, indent: string): string {
  return [
    'do',
    `  local mark = ${mark}`,
    "  local ttl = redis.call('PTTL', mark)",
    `  for _, k in ipairs(${keys}) do`,
    "    local t = redis.call('PTTL', k)",
    '    if t > ttl then ttl = t end',
    '  end',
    "  if ttl > 0 then redis.call('SET', mark, string.format('%.0f', now), 'PX', ttl + 1) end",
    'end',
  ].map((line) => indent + line).join('\n');
}

/** Lua for the reset mark's key of the user key whose limit key is `key` (its base: up to the hash tag's `}:`). */
function luaMarkKey(key: string): string {
  return `string.match(${key}, '^(.*}:)') .. '${RESET_MARK}'`;
}

/** Lua for ceil(expr / k), `expr` an integer: itself when k is 1 (no call to make). */
function ceilDiv(expr: string, k: number): string {
  return k === 1 ? `(${expr})` : `math.ceil((${expr}) / ${k})`;
}

/** Lua for floor(expr / T), `expr` an integer: itself when T is 1. */
function floorDiv(expr: string, T: number): string {
  return T === 1 ? `(${expr})` : `math.floor((${expr}) / ${T})`;
}

/**
 * Lua that declares `name`, the debt in units (of 1/k µs) of the state stored at `key` at `now`:
 * 0 for a missing key or a TAT already past. A whole TAT is an 8-byte big-endian double, told
 * apart by its first byte: no integer's is a digit or '-' (0's is a zero byte, a positive one's
 * at least 0x3F, a negative one's at least 0x80), and every text form starts with one (a TAT
 * is negative only under the tests' time override). "tat:frac:k'" has its fraction converted
 * from 1/k' to 1/k, rounded up (never less debt); a plain decimal TAT (as stored before the
 * packed form) reads with one tonumber.
 */
function luaDebt(name: string, key: string, k: number, indent: string): string {
  return [
    `local ${name} = 0`,
    'do',
    `  local v = redis.call('GET', ${key})`,
    '  if v then',
    '    local b = string.byte(v)',
    '    if b ~= 45 and (b < 48 or b > 57) then',
    `      ${name} = (struct.unpack('>d', v) - now) * ${k}`,
    '    else',
    '      local tat = tonumber(v)',
    '      if tat then',
    `        ${name} = (tat - now) * ${k}`,
    '      else',
    "        local whole, frac, stored = string.match(v, '^(-?%d+):(%d+):(%d+)$')",
    '        frac, stored = tonumber(frac), tonumber(stored)',
    `        if stored ~= ${k} then frac = math.ceil(frac * ${k} / stored) end`,
    `        ${name} = (tonumber(whole) - now) * ${k} + frac`,
    '      end',
    '    end',
    `    if ${name} < 0 then ${name} = 0 end`,
    '  end',
    'end',
  ].map((line) => indent + line).join('\n');
}

/**
 * Lua that stores a debt of `expr` units at `key`, with an expiry at the moment it reaches 0 (the
 * state then equals a fresh key's). `mayBeSpent`: the debt may be 0 or less (a refund), and the
 * key is then deleted. Under k = 1 there is never a fraction.
 */
function luaStore(key: string, k: number, expr: string, mayBeSpent: boolean, indent: string): string {
  const px = `math.ceil(d / ${k} / 1000) + pad`;
  const write = k === 1
    ? [`redis.call('SET', ${key}, struct.pack('>d', now + d), 'PX', ${px})`]
    : [
      `local whole = math.floor(d / ${k})`,
      `local frac = d - whole * ${k}`,
      `if frac > 0 then redis.call('SET', ${key}, string.format('%.0f:%.0f:${k}', now + whole, frac), 'PX', ${px})`,
      `else redis.call('SET', ${key}, struct.pack('>d', now + whole), 'PX', ${px}) end`,
    ];
  const body = mayBeSpent
    ? [`if d <= 0 then redis.call('DEL', ${key}) else`, ...write.map((l) => `  ${l}`), 'end']
    : write;
  return ['do', `  local d = ${expr}`, ...body.map((l) => `  ${l}`), 'end'].map((line) => indent + line).join('\n');
}
