// What several scenarios share: the clock's moves, the GCRA verdict, and a look into the table
// after a run for keys with more than one live copy.
import { callsOf, linearizable } from '../models.mjs';

/**
 * The moves a clock reading may make (the first, stay, is the default): one tick, to the next
 * interval (or window) edge, to the next second, across a 32-bit wrap of the ticks, and back by a
 * tick and by a second. Steps back further than the limiter's documented range are not moves.
 */
export function timeMoves({ startMs, tickMs, intervalMs, wrapMs, backMs = [tickMs, 1000] }) {
  const edge = (size) => (now) => (Math.floor(now / size) + 1) * size;
  const moves = [
    { name: 'stay', to: (now) => now },
    { name: 'tick', to: (now) => now + tickMs },
    { name: 'interval edge', to: edge(intervalMs) },
    { name: 'second edge', to: edge(1000) },
  ];
  if (wrapMs !== undefined) moves.push({ name: 'wrap', to: (now) => now + wrapMs });
  for (const b of backMs) moves.push({ name: `back ${b} ms`, to: (now) => now - b });
  return { startMs, moves };
}

/** The verdict for calls of `allow(key)` (the key in the label's call, cost 1). */
export function gcraOutcome(exec, model, outcome = (c) => ({ key: 'k', cost: 1, admitted: c.result === true })) {
  return linearizable(callsOf(exec), model, outcome, { since: exec.startMs });
}

/**
 * Keys (of `keys`) held by more than one live slot of the table in `buffer`: a violation, or
 * null. With `heap` (the table's key heap), long keys are read in full, and every one of `keys`
 * must be live.
 */
export function liveCopies(buffer, lib, keys, heap = null) {
  const L = lib.layout;
  const w = new Int32Array(buffer);
  const { slots } = geometry(buffer, lib);
  const keyAt = w[L.H_STATE_OFFSET] + w[L.H_STATE_WORDS];
  const inlineBytes = 4 * w[L.H_INLINE_KEY_WORDS];
  const bytes = new Uint8Array(buffer);
  const counts = new Map();
  for (let s = 0; s < slots; s++) {
    const base = L.HEADER_WORDS + s * w[L.H_SLOT_WORDS];
    if ((w[base + L.S_CTRL] & 3) !== L.LIVE || w[base + L.S_TAT] === L.DEAD) continue;
    const n = w[base + L.S_KEY_BYTES];
    const head = bytes.slice(4 * (base + keyAt), 4 * (base + keyAt) + Math.min(n, inlineBytes));
    let key = new TextDecoder().decode(head);
    if (n > inlineBytes) {
      if (heap === null) return `a long key (${n} bytes) is live: pass the key heap`;
      const ref = w[base + keyAt + inlineBytes / 4];
      key = new TextDecoder().decode(Buffer.concat([head, new Uint8Array(heap).slice(4 * (ref + 1), 4 * (ref + 1) + n - inlineBytes)]));
    }
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  for (const k of keys) if ((counts.get(k) ?? 0) > 1) return `key ${k} has ${counts.get(k)} live copies`;
  if (heap !== null) for (const k of keys) if (!counts.has(k)) return `key ${k} is not live (or not read back in full)`;
  return null;
}

/** Names the words of a table buffer for traces: header fields, and slot N's fields. */
export function tableWordNames(buffer, lib) {
  const L = lib.layout;
  const w = new Int32Array(buffer);
  const slab = w[L.H_LAYOUT] === L.SLAB;
  const header = new Map(Object.entries(L).filter(([k, v]) => k.startsWith('H_') && typeof v === 'number' && k !== 'H_LIMITS_BYTE').map(([k, v]) => [v, k.slice(2).toLowerCase()]));
  const slotWords = w[L.H_SLOT_WORDS];
  const stateAt = w[L.H_STATE_OFFSET];
  const keyAt = stateAt + w[L.H_STATE_WORDS];
  const globalBase = w[L.H_GLOBAL_BASE];
  const fields = ['ctrl', 'tat', 'lastSec', 'hash', 'keyBytes'];
  return (byte) => {
    const word = byte >> 2;
    if (word < L.HEADER_WORDS) return `header ${header.get(word) ?? word}`;
    if (globalBase > 0 && word >= globalBase) return `global ${['lock', 'lastSec'][word - globalBase] ?? `state[${word - globalBase - 2}]`}`;
    if (slab && word >= w[L.H_DIRECTORY_SEQS]) return `tombstone seq ${word - w[L.H_DIRECTORY_SEQS]}`;
    if (slab && word >= w[L.H_DIRECTORY]) return `directory ${word - w[L.H_DIRECTORY]}`;
    const slot = Math.floor((word - L.HEADER_WORDS) / slotWords);
    const off = word - L.HEADER_WORDS - slot * slotWords;
    const field = off < fields.length ? fields[off] : off < keyAt ? `state[${off - stateAt}]` : `key[${off - keyAt}]`;
    return `slot ${slot} ${field}`;
  };
}

/** Trace names for scenarios whose first buffer is a table: its words by field, others by byte. */
export function tableNames(buffers, lib) {
  const table = tableWordNames(buffers[0], lib);
  return (buf, byte) => (buf === 0 ? table(byte) : `buffer ${buf} byte ${byte}`);
}

/**
 * Whether a slot's key was reclaimed (its ctrl word compareExchanged to TOMB) while a call was
 * under way. A decision whose key is reclaimed and inserted again under it keeps the spend it
 * made in the new incarnation and decides again there: it may refuse where the exact model
 * admits (conservative, docs/testing.md, "Found, not yet fixed"). Such runs are judged on their
 * admissions only.
 */
export function reclaimedUnderCall(exec, lib) {
  const L = lib.layout;
  const slotWords = new Int32Array(exec.buffers[0])[L.H_SLOT_WORDS];
  const isCtrl = (e) => e.buf === 0 && e.elem === 'Int32' && e.byte / 4 >= L.HEADER_WORDS
    && (e.byte / 4 - L.HEADER_WORDS) % slotWords === L.S_CTRL;
  const calls = exec.reports.flatMap((r) => r.calls).filter((c) => c.firstStep >= 0);
  return exec.trace.some((e) => e.kind === 'cas' && isCtrl(e) && e.result === e.a0 && (e.a1 & 3) === L.TOMB
    && calls.some((c) => c.firstStep < e.step && e.step < c.lastStep));
}

/**
 * The table in `buffer`: its words, slot count, and where a key of hash `hash` lives (table.ts's
 * #home): its stripe's first slot (from the hash's top bits, stripeOfHash), and its home's
 * position in the stripe (from the re-mixed top bits).
 */
function geometry(buffer, lib) {
  const L = lib.layout;
  const w = new Int32Array(buffer);
  const stripes = w[L.H_STRIPES];
  const perStripe = w[L.H_SLOTS_PER_STRIPE];
  const shift = 32 - Math.max(6, Math.log2(perStripe));
  const homeOf = (hash) => ({ start: L.stripeOfHash(hash, stripes) * perStripe, home: (Math.imul(hash, 0x9e3779b1) >>> shift) & (perStripe - 1) });
  // A SLAB table (slab-layout.ts): its slots are not its probe structure; its directory is, with
  // the stripes, and homeOf places a hash in it.
  const slab = w[L.H_LAYOUT] === L.SLAB;
  const slots = slab ? w[L.H_SLAB_SLOTS] : stripes * perStripe;
  return { L, w, slots, homeOf, slab, entries: stripes * perStripe, directory: w[L.H_DIRECTORY] };
}

/** A SLAB table's REF entries: [position, slot] of each (slab-layout.ts: (slot + 1) << 9 | tag << 2 | 1). */
function refsOf({ L, w, entries, directory }) {
  const refs = [];
  for (let pos = 0; pos < entries; pos++) if ((w[directory + pos] & 3) === 1) refs.push([pos, (w[directory + pos] >>> 9) - 1]);
  void L;
  return refs;
}

/**
 * The table's counters (table-counters.ts) against its slots, once every thread has finished:
 * LIVE and TOMB slots and the LIVE slots' displacement from their home, each transition counted
 * exactly once whatever the interleaving. A violation, or null.
 */
export function countersAgree(buffer, lib) {
  const g = geometry(buffer, lib);
  const { L, w, slots, homeOf } = g;
  let live = 0;
  let tombs = 0;
  let displaced = 0;
  if (g.slab) {
    // LIVE slots; TOMB directory entries; the displacement of each LIVE slot's entry (probe step).
    for (let slot = 0; slot < slots; slot++) if ((w[L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS] + L.S_CTRL] & 3) === L.LIVE) live++;
    for (let pos = 0; pos < g.entries; pos++) if ((w[g.directory + pos] & 3) === 3) tombs++;
    for (const [pos, slot] of refsOf(g)) {
      const base = L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS];
      if ((w[base + L.S_CTRL] & 3) !== L.LIVE) continue;
      const { start, home } = homeOf(w[base + L.S_HASH]);
      displaced += (pos - start - home) & (w[L.H_SLOTS_PER_STRIPE] - 1);
    }
  }
  for (let slot = 0; slot < slots && !g.slab; slot++) {
    const base = L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS];
    const state = w[base + L.S_CTRL] & 3;
    if (state === L.TOMB) tombs++;
    if (state !== L.LIVE) continue;
    live++;
    const { start, home } = homeOf(w[base + L.S_HASH]);
    displaced += (slot - start - home) & (w[L.H_SLOTS_PER_STRIPE] - 1);
  }
  const counted = { live: 0, tombs: 0, displaced: 0 };
  for (let cell = 0; cell < L.COUNTER_CELLS; cell++) {
    const at = w[L.H_COUNTERS] + cell * L.CELL_WORDS;
    counted.live += w[at + L.C_LIVE];
    counted.tombs += w[at + L.C_TOMBS];
    counted.displaced += w[at + L.C_DISPLACED];
  }
  if (counted.live === live && counted.tombs === tombs && counted.displaced === displaced) return null;
  return `the table's counters say ${counted.live} live, ${counted.tombs} tombstones, displacement ${counted.displaced}; ` +
    `its slots hold ${live}, ${tombs}, ${displaced}`;
}

/**
 * Live keys of the table in `buffer` that a lookup cannot reach: an EMPTY slot between the key's
 * home and its own slot (a lookup stops at the first EMPTY slot). A violation, or null.
 */
export function brokenChains(buffer, lib) {
  const g = geometry(buffer, lib);
  const { L, w, slots, homeOf } = g;
  const mask = w[L.H_SLOTS_PER_STRIPE] - 1;
  if (g.slab) {
    // Every entry of a LIVE key, and every stale entry of a free slot (whose next claimer looks
    // for it from its home), reachable from its home without an EMPTY entry.
    const live = new Map();
    for (const [pos, slot] of refsOf(g)) {
      const base = L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS];
      const state = w[base + L.S_CTRL] & 3;
      if (state === L.BUSY) continue;
      if (state === L.EMPTY) return `directory entry ${pos} points at slot ${slot}, which is EMPTY (free with no entry)`;
      const isLive = state === L.LIVE && w[base + L.S_TAT] !== L.DEAD;
      if (isLive) live.set(slot, (live.get(slot) ?? 0) + 1);
      const { start, home } = homeOf(w[base + L.S_HASH]);
      for (let j = home; start + j !== pos; j = (j + 1) & mask) {
        if (w[g.directory + start + j] === 0) return `directory entry ${pos} (slot ${slot}, ${isLive ? 'live' : 'stale'}) is cut off from its home: entry ${start + j} is EMPTY`;
      }
    }
    for (let slot = 0; slot < slots; slot++) {
      const base = L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS];
      if ((w[base + L.S_CTRL] & 3) !== L.LIVE || w[base + L.S_TAT] === L.DEAD) continue;
      if (live.get(slot) !== 1) return `live slot ${slot} has ${live.get(slot) ?? 0} directory entries`;
    }
    return null;
  }
  const ctrl = (slot) => w[L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS] + L.S_CTRL];
  for (let slot = 0; slot < slots; slot++) {
    const base = L.HEADER_WORDS + slot * w[L.H_SLOT_WORDS];
    if ((w[base + L.S_CTRL] & 3) !== L.LIVE || w[base + L.S_TAT] === L.DEAD) continue;
    const { start, home } = homeOf(w[base + L.S_HASH]);
    for (let j = home; start + j !== slot; j = (j + 1) & mask) {
      if ((ctrl(start + j) & 3) === L.EMPTY) return `slot ${slot}'s key is cut off from its home: slot ${start + j} is EMPTY`;
    }
  }
  return null;
}

/**
 * A time in ms as a whole number of `tickMs` ticks, for models on the tick grid: the tick it
 * names when within float noise of it (a sum of moves lands an ulp off a tick: 4096000.0000079996
 * is the double nearest 4096000.000008), else the tick below.
 */
export function onTickGrid(tickMs) {
  return (ms) => {
    const t = ms / tickMs;
    return Math.abs(t - Math.round(t)) < 1e-3 ? Math.round(t) : Math.floor(t);
  };
}

/**
 * The run's calls with their readings in whole ticks (`onTickGrid`), and the conversion itself.
 * Each call keeps its readings in ms as `rawReadings`, for what the limiter compares in ms.
 */
export function callsOnTickGrid(exec, tickMs) {
  const ticks = onTickGrid(tickMs);
  return { ticks, calls: callsOf(exec).map((c) => ({ ...c, readings: c.readings.map(ticks), rawReadings: c.readings })) };
}

/**
 * A thread that checks `key` once per cost of `costs` (RateLimiter.tryAcquire, on the process
 * clock), each call labelled with the key: its result is { allowed, reason, cost }, as
 * `keyedOutcome` reads it.
 */
export function checksOf(key, costs) {
  return (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
    ctx.ready();
    for (const cost of costs) {
      ctx.call(key, () => {
        const d = rl.tryAcquire(key, cost);
        return { allowed: d.allowed, reason: d.reason, cost };
      });
    }
  };
}

/**
 * A `checksOf` call's outcome for `linearizable`: its key, cost and verdict; null (outside the
 * model) for a refusal for want of a slot, which a table of fewer slots than keys must answer.
 */
export function keyedOutcome(c) {
  return c.result.reason === 'table-full' ? null : { key: c.label, cost: c.result.cost, admitted: c.result.allowed };
}
