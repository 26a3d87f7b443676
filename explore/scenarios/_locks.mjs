// Helpers for the scenarios of the per-key lock (src/table/slot-lock.ts) and of leases
// (src/concurrency/): an exact sliding-log model, the clock moves that cross a lock's steal age,
// a check that no lock was taken over before it was stale, and a count of leases held.
import { callsOf, linearizable } from '../models.mjs';
import { liveCopies, tableWordNames } from './common.mjs';

/** claimTimeoutMs of the locked scenarios, the locks' stealAfterMs: 30x it (3 s) bounds an insert's stall. */
export const STEAL_MS = 100;
/**
 * The table option that sets the locked scenarios' reuseAfterMs to 30x STEAL_MS (by default it is
 * 30 s at least: src/table/table-options.ts, REUSE_AFTER_MS_OPTION), so that their clock moves
 * cross it, and the checks below judge takeovers against that age.
 */
export const STAGED_REUSE = { [Symbol.for('sluice.reuseAfterMs')]: 30 * STEAL_MS };
/** Where the locked scenarios' clock starts. */
export const LOCKED_START_MS = 4999.75;

/** A set-up: a sliding-log RateLimiter of `permits` a second (claimTimeoutMs STEAL_MS) on a table of `maxKeys` keys. */
export function slidingLogSetup(permits, maxKeys) {
  return (lib) => {
    const rl = new lib.RateLimiter({
      limit: lib.perSecond(permits), algorithm: 'sliding-log', maxKeys, claimTimeoutMs: STEAL_MS, hashSeed: 7, ...STAGED_REUSE,
    });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  };
}

/**
 * What locked-log and locked-reset share: a sliding log of 2 a second on a 4-key table, the lock
 * moves from LOCKED_START_MS, and a deep search that spends its depth on preemptions (a
 * taken-over holder's rewrite needs three and one clock move past the steal age; the lock words
 * are never read plainly). Spread into a scenario with its name, threads and check.
 */
export function twoPerSecondLog() {
  return {
    time: lockMoves({ startMs: LOCKED_START_MS, tickMs: 1e-5, stealAfterMs: STEAL_MS, periodMs: 1000 }),
    mayWait: true,
    maxSteps: 3000,
    bounds: { deep: { preemptions: 3, timeMoves: 1, staleReads: 0 } },
    setup: slidingLogSetup(2, 4),
  };
}

/**
 * How a sliding-log scenario's verdict starts: null when the run broke the table's documented
 * stall assumption (not judged), else the test of the table's lock words, `(buf, byte)`.
 */
export function lockWordsOf(exec, lib) {
  if (pastClaimAssumption(exec, lib, LOCKED_START_MS)) return null;
  const isLock = slotLockWord(exec.buffers[0], lib);
  return (buf, byte) => buf === 0 && isLock(byte);
}

/**
 * The clock's moves for locked scenarios (no step back: the lock stamps come from
 * performance.now(), one monotonic timeline for every thread): stay, one tick, just past the
 * lock's steal age (`stealAfterMs` whole ms, plus 2: ageMs floors both ends), and past a whole
 * period plus the steal age (a takeover and an expiry in one move).
 */
export function lockMoves({ startMs, tickMs, stealAfterMs, periodMs }) {
  return {
    startMs,
    moves: [
      { name: 'stay', to: (now) => now },
      { name: 'tick', to: (now) => now + tickMs },
      { name: 'past steal age', to: (now) => now + stealAfterMs + 2 },
      { name: 'past period', to: (now) => now + periodMs + stealAfterMs + 2 },
    ],
  };
}

/**
 * The exact sliding log, a log per key: a request of `cost` at reading r passes when the
 * admissions at readings t with r - t < periodMs, plus cost, are at most `permits`; each
 * admission is logged at its reading. The limiter stamps in ticks (a stamp rounded up, an age
 * from the reading rounded down), so an entry within `slackMs` of the period's edge may count
 * either way: the model admits when the entries surely inside leave room, and counts a refusal
 * as justified when the entries possibly inside fill it. An outcome with `op: 'reset'` is
 * RateLimiter.reset (its `owed`: what it answered); `op: 'penalty'` and `op: 'reward'` are
 * RateLimiter.penalty and reward.
 */
export function slidingLogModel({ permits, periodMs }, { slackMs = 0, keyOf = (o) => o.key } = {}) {
  const count = (log, r, edge) => log.filter((t) => r - t < edge).length;
  return {
    init: () => new Map(),
    judge(state, o, reading) {
      const log = state.get(keyOf(o)) ?? [];
      if (o.op === 'reset') {
        // A reset (o.admitted always true) empties the key's log; its answer, whether the key
        // owed anything, must match an entry possibly inside the period (true) or none surely
        // inside it (false).
        const admit = o.owed ? count(log, reading, periodMs + slackMs) > 0 : count(log, reading, periodMs - slackMs) === 0;
        return { admit, refuses: !admit, next: new Map(state).set(keyOf(o), []) };
      }
      // A penalty (RateLimiter.penalty on a log) spends like an admission, whether or not there is
      // room, and the log keeps its newest `permits` entries; a reward removes the newest `cost`
      // entries that may still count (what the limiter clears: those its reading counts).
      if (o.op === 'penalty') {
        const next = [...log, ...new Array(o.cost).fill(reading)].slice(-permits);
        return { admit: true, refuses: false, next: new Map(state).set(keyOf(o), next) };
      }
      if (o.op === 'reward') {
        const inside = log.filter((t) => reading - t < periodMs + slackMs);
        const next = inside.slice(0, Math.max(0, inside.length - o.cost));
        return { admit: true, refuses: false, next: new Map(state).set(keyOf(o), next) };
      }
      const admit = count(log, reading, periodMs - slackMs) + o.cost <= permits;
      const refuses = count(log, reading, periodMs + slackMs) + o.cost > permits;
      const next = new Map(state).set(keyOf(o), [...log, ...new Array(o.cost).fill(reading)]);
      return { admit, refuses, next };
    },
  };
}

/**
 * The verdict on calls labelled 'allow' (cost 1 on key 'k', or `key` from the call's label).
 * After a lock takeover (`tookOver`), refusals are not judged: a holder that stalled past the
 * steal age leaves entries newer than the ones they replaced, which another holder's head may
 * commit, and docs/design.md accepts that the log is then more conservative than exact.
 */
export function logOutcome(exec, model, { tookOver = false } = {}) {
  const outcome = (c) => (c.label.startsWith('allow') && c.error === null
    ? { key: c.label.split(' ')[1] ?? 'k', cost: 1, admitted: c.result === true }
    : null);
  const v = linearizable(callsOf(exec), model, outcome, { since: exec.startMs });
  return v !== null && tookOver && v.startsWith('phantom refusal') ? null : v;
}

/** Whether some lock word was taken over from a holder's token during the run. */
export function anyTakeover(exec, lib, isLock) {
  const DEAD = lib.layout.DEAD;
  return exec.trace.some((e) => e.kind === 'cas' && e.result === e.a0 && isLock(e.buf, e.byte) && e.a0 !== 0 && e.a0 !== DEAD &&
    e.a1 !== 0 && e.a1 !== DEAD);
}

/**
 * A sliding log whose key stayed in one slot counts one commit per admission: its head word's
 * commit count (head >>> 16; a commit adds one, an undo takes it back) equals the admitted calls.
 * More is an admission spent twice (a decision run again after its commit landed).
 */
export function logCommits(exec, lib, key) {
  const bases = liveSlotsOf(exec.buffers[0], lib, key);
  if (bases.length !== 1) return null;
  const w = new Int32Array(exec.buffers[0]);
  const commits = w[bases[0] + w[lib.layout.H_STATE_OFFSET]] >>> 16;
  const admitted = callsOf(exec)
    .filter((c) => c.label.startsWith('allow') && c.result === true && (c.label.split(' ')[1] ?? 'k') === key).length;
  return commits === admitted ? null : `key ${key}'s log committed ${commits} time(s) for ${admitted} admitted call(s)`;
}

/** A lock token's "guarded" bit, value 4 (src/table/slot-lock.ts): a reset, a reward or a PolicyLimiter reshape under the lock. */
const GUARDED = 4;

/**
 * Every takeover of a key lock (a successful compareExchange of a lock word from another
 * holder's token to a new token) must come at a reading more than `stealAfterMs` whole ms after
 * the reading at which that token was taken (a guarded token: the reclaim age below): otherwise
 * two threads held the lock at once while neither was stale. And a reclaim (a token turned DEAD) must have taken its token from a free
 * word, or from one stamped more than the table's reuse age before (its header's
 * H_REUSE_AFTER_MS, as LockAges in slot-lock.ts caps it; STAGED_REUSE sets it here):
 * a holder stalled past the steal age may still write, and must not write into the slot's next
 * key. `isLock(buf, byte)` names the lock words. Readings are each thread's last clock reading
 * before its compareExchange (the lock stamps with exactly that one).
 */
export function lockTakeovers(exec, lib, stealAfterMs, isLock) {
  const DEAD = lib.layout.DEAD;
  // A reclaim waits longer than a decision: the table's reuse age (LockAges in slot-lock.ts).
  const reclaimAfterMs = Math.max(stealAfterMs, Math.min(reuseAgeOf(exec, lib), 2 ** 19));
  const last = new Map(); // thread -> its last reading
  const taken = new Map(); // `${buf}:${byte}:${token}` -> { thread, reading, step, from }
  for (const e of exec.trace) {
    if (e.kind === 'clock') { last.set(e.thread, e.result); continue; }
    if (e.kind !== 'cas' || e.result !== e.a0 || !isLock(e.buf, e.byte)) continue;
    const token = e.a1;
    if (token === DEAD) {
      // A reclaim's final step: the token it turns DEAD was taken from a free word, or from one
      // (a token, or a released word) stamped more than reclaimAfterMs before it took it.
      const own = taken.get(`${e.buf}:${e.byte}:${e.a0}`);
      if (own !== undefined && own.from !== 0) {
        const age = ((Math.floor(own.reading) & 0xfffff) - (own.from >>> 11)) & 0xfffff;
        if (!(age > reclaimAfterMs)) {
          return `reclaim took a lock over too young: T${e.thread} took the lock word (buffer ${e.buf} byte ${e.byte}) at step ` +
            `${own.step} from ${own.from}, ${age} ms old, and reclaimed at step ${e.step} (a reclaim waits ${reclaimAfterMs} ms)`;
        }
      }
      continue;
    }
    if (token === 0 || (token & 1) !== 1) continue;
    const reading = last.get(e.thread);
    if (e.a0 !== 0) {
      const held = taken.get(`${e.buf}:${e.byte}:${e.a0}`);
      // A guarded token (its bit of value 4) is taken over only past the reclaim age.
      const after = (e.a0 & GUARDED) !== 0 ? reclaimAfterMs : stealAfterMs;
      if (held !== undefined && !(Math.floor(reading) - Math.floor(held.reading) > after)) {
        return `lock taken over while fresh: T${e.thread} at step ${e.step} (reading ${reading}) took the lock word ` +
          `(buffer ${e.buf} byte ${e.byte}) from T${held.thread}'s token ${e.a0}, taken at step ${held.step} at reading ${held.reading} ` +
          `(steal after ${after} ms${after === stealAfterMs ? '' : ', a guarded token'})`;
      }
    }
    taken.set(`${e.buf}:${e.byte}:${token}`, { thread: e.thread, reading, step: e.step, from: e.a0 });
  }
  return null;
}

/** Whether a table buffer's byte is some slot's lock (tat) word. */
export function slotLockWord(buffer, lib) {
  const L = lib.layout;
  const w = new Int32Array(buffer);
  const slotWords = w[L.H_SLOT_WORDS];
  const slots = w[L.H_STRIPES] * w[L.H_SLOTS_PER_STRIPE];
  return (byte) => {
    const word = byte >> 2;
    if ((byte & 3) !== 0 || word < L.HEADER_WORDS || word >= L.HEADER_WORDS + slots * slotWords) return false;
    return (word - L.HEADER_WORDS) % slotWords === L.S_TAT;
  };
}

/**
 * Leases: each call labelled 'acquire <key>' returns { allowed, expiresAtMs } and each labelled
 * 'release' releases the thread's last lease (returning what release() said). A lease is surely
 * held from its acquire's last step until the first step of its release (true or false), or
 * until a reading at or past its expiry (`slackMs` for the tick's rounding), whichever comes
 * first; it is possibly held from its acquire's first step until its release's last step and
 * until every reading of a call judged at it is past its expiry. Returns a violation when, at
 * some step, more than `maxInFlight` leases of a key are surely held, or when an acquire was
 * refused while fewer than `maxInFlight` leases of its key were possibly held during it.
 * `strayLeaseMs`, for scenarios where a slot passes from one key to another: an acquire of
 * another key that began before the refusal ended may have left its stamp in the refused key's
 * places (stalled past its lock check across a reclaim and the slot's reuse: docs/design.md
 * accepts that the new key carries that place until the stamp expires), so it counts as possibly
 * held, until its latest reading plus the lease.
 * A call labelled 'reset <key>' (ConcurrencyLimiter.reset) frees every lease of its key: once it
 * has ended, a lease whose acquire had not ended before the reset began is no longer surely held
 * (the reset may have followed it), and one whose acquire ended before the reset began is surely
 * freed (not possibly held for an acquire that began after the reset ended).
 */
export function leaseCheck(exec, maxInFlight, { slackMs = 1e-6, strayLeaseMs = null } = {}) {
  const leases = [];
  const acquires = [];
  const resets = [];
  for (const r of exec.reports) {
    let mine = null;
    r.calls.forEach((c, i) => {
      const name = `T${r.thread}.${i}`;
      if (c.error !== null) { mine = null; return; }
      if (c.label.startsWith('reset')) {
        resets.push({ key: c.label.split(' ')[1], call: c });
      } else if (c.label.startsWith('acquire')) {
        const a = { name, key: c.label.split(' ')[1], call: c };
        acquires.push(a);
        if (c.result.allowed) { mine = { ...a, release: null }; leases.push(mine); }
      } else if (c.label === 'release' && mine !== null) {
        mine.release = c;
        mine = null;
      }
    });
  }
  // The clock at each step: the latest reading made so far (no move goes back).
  const now = [];
  let t = exec.trace.find((e) => e.kind === 'clock')?.result ?? -Infinity;
  for (const e of exec.trace) { if (e.kind === 'clock') t = Math.max(t, e.result); now.push(t); }
  // A reset of the lease's key, ended by step s, that did not end before the lease's acquire began.
  const mayBeReset = (l, s) => resets.some((x) => x.key === l.key && x.call.lastStep <= s && x.call.lastStep >= l.call.firstStep);
  // A reset of the lease's key that began after its acquire ended and ended before step f.
  const surelyReset = (l, f) => resets.some((x) => x.key === l.key && x.call.firstStep > l.call.lastStep && x.call.lastStep < f);
  for (let s = 0; s < exec.trace.length; s++) {
    const held = new Map();
    for (const l of leases) {
      const end = l.release === null ? Infinity : l.release.firstStep;
      if (l.call.lastStep <= s && s < end && now[s] < l.call.result.expiresAtMs - slackMs && !mayBeReset(l, s)) {
        held.set(l.key, [...(held.get(l.key) ?? []), l.name]);
      }
    }
    for (const [key, names] of held) {
      if (names.length > maxInFlight) {
        return `over-admission: at step ${s} (clock ${now[s]}) leases ${names.join(', ')} all hold key ${key} (maxInFlight ${maxInFlight})`;
      }
    }
  }
  for (const a of acquires) {
    if (a.call.result.allowed) continue;
    const { firstStep: f, lastStep: l, readings } = a.call;
    const possibly = leases.filter((x) => x.key === a.key && x !== a && x.call.firstStep <= l && !surelyReset(x, f) &&
      !(x.release !== null && x.release.result === true && x.release.lastStep < f) &&
      readings.some((r) => r < x.call.result.expiresAtMs + slackMs));
    const strays = strayLeaseMs === null ? [] : acquires.filter((x) => x.key !== a.key && x.call.firstStep <= l &&
      readings.some((r) => r < Math.max(...x.call.readings) + strayLeaseMs + slackMs));
    possibly.push(...strays);
    if (possibly.length < maxInFlight) {
      const held = possibly.map((x) => x.name).join(', ') || 'no lease';
      return `phantom refusal: ${a.name} acquire ${a.key} refused at ${readings.join('/')} (steps ${f}-${l}), ${held} possibly held`;
    }
  }
  return null;
}

/** The bases of the live slots of `key` in a table buffer (ctrl LIVE, lock word not DEAD). */
export function liveSlotsOf(buffer, lib, key) {
  const L = lib.layout;
  const w = new Int32Array(buffer);
  const slots = w[L.H_STRIPES] * w[L.H_SLOTS_PER_STRIPE];
  const keyAt = w[L.H_STATE_OFFSET] + w[L.H_STATE_WORDS];
  const bytes = new Uint8Array(buffer);
  const found = [];
  for (let s = 0; s < slots; s++) {
    const base = L.HEADER_WORDS + s * w[L.H_SLOT_WORDS];
    if ((w[base + L.S_CTRL] & 3) !== L.LIVE || w[base + L.S_TAT] === L.DEAD) continue;
    const n = w[base + L.S_KEY_BYTES];
    if (new TextDecoder().decode(bytes.slice(4 * (base + keyAt), 4 * (base + keyAt) + n)) === key) found.push(base);
  }
  return found;
}

/**
 * A sliding log's entries after the run never date an admission earlier than it was made: stamps
 * only move forward (a commit stamps max(newest, reading)), so the last `permits` commits hold
 * the largest stamps, and sorted from the newest, the j-th entry of the key's log is at least the
 * j-th latest first reading of an admitted call. Admissions more than a period before the run's
 * last reading are left out (their entries may be overwritten, or cleared as stale). `tickMs`:
 * the log's tick (stamps are ticks modulo 2^32, here all below 2^31).
 */
export function logDominates(exec, lib, key, { permits, periodMs, tickMs }) {
  const bases = liveSlotsOf(exec.buffers[0], lib, key);
  if (bases.length !== 1) return null;
  const L = lib.layout;
  const w = new Int32Array(exec.buffers[0]);
  const at = bases[0] + w[L.H_STATE_OFFSET] + 1;
  const entries = Array.from(w.subarray(at, at + permits)).filter((e) => e !== -0x80000000).map((e) => e * tickMs).sort((a, b) => b - a);
  const calls = callsOf(exec).filter((c) => c.label.startsWith('allow') && c.result === true && (c.label.split(' ')[1] ?? 'k') === key);
  const last = Math.max(...exec.trace.filter((e) => e.kind === 'clock').map((e) => e.result));
  const firsts = calls.map((c) => Math.min(...c.readings)).filter((r) => r > last - periodMs).sort((a, b) => b - a).slice(0, permits);
  for (let j = 0; j < firsts.length; j++) {
    if (!(entries[j] >= firsts[j] - tickMs)) {
      return `log entry dated early: key ${key}'s log holds ${entries.join(', ')} ms, ` +
        `but admissions were made from ${firsts.join(', ')} ms on`;
    }
  }
  return null;
}

/**
 * Every lease granted, not released and not expired at the run's last reading still holds a
 * place in its key's live slot: the places of that slot held at that reading are at least as
 * many as such leases (a reclaim needs every place free, so it cannot have taken them).
 */
export function leasesInPlace(exec, lib, keys, { maxInFlight, tickMs, slackMs = 1e-6 }) {
  const L = lib.layout;
  const w = new Int32Array(exec.buffers[0]);
  const last = Math.max(...exec.trace.filter((e) => e.kind === 'clock').map((e) => e.result));
  const now32 = Math.floor(last / tickMs + 1e-6) | 0;
  for (const key of keys) {
    let standing = 0;
    for (const r of exec.reports) {
      r.calls.forEach((c, i) => {
        if (c.label !== `acquire ${key}` || c.error !== null || !c.result.allowed || !(c.result.expiresAtMs > last + slackMs)) return;
        const next = r.calls[i + 1];
        if (next?.label === 'release') return;
        standing++;
      });
    }
    if (standing === 0) continue;
    const bases = liveSlotsOf(exec.buffers[0], lib, key);
    let held = 0;
    for (const base of bases) {
      const at = base + w[L.H_STATE_OFFSET];
      for (let i = 0; i < maxInFlight; i++) if (w[at + i] !== 0 && ((w[at + i] - now32) | 0) > 0) held++;
    }
    if (held < standing) {
      return `lease out of place: ${standing} lease(s) of ${key} stand unexpired at ${last} ms, but its live slot(s) hold ${held} place(s)`;
    }
  }
  return null;
}

/** Trace names for a scenario whose buffer 0 is the table. */
export function tableNames(buffers, lib) {
  const table = tableWordNames(buffers[0], lib);
  return (buf, byte) => (buf === 0 ? table(byte) : `buffer ${buf} byte ${byte}`);
}

/** The reuse age (ms) of the table in the run's buffer 0: its header's H_REUSE_AFTER_MS. */
export function reuseAgeOf(exec, lib) {
  return new Int32Array(exec.buffers[0])[lib.layout.H_REUSE_AFTER_MS];
}

/**
 * Whether the run left the table's one timing assumption (src/table/insert.ts,
 * REUSE_AFTER_TIMEOUTS): no inserter stalls for the table's reuse age between its claim and its
 * publish.
 * A run whose clock moved that far in all may have stalled an inserter that long (the stalled
 * insert then writes its initial state over the slot's next occupant, as documented): such runs
 * are not judged. The scenarios pick a claim timeout that keeps the CI and deep moves inside.
 */
export function pastClaimAssumption(exec, lib, startMs) {
  const last = Math.max(startMs, ...exec.trace.filter((e) => e.kind === 'clock').map((e) => e.result));
  return last - startMs >= reuseAgeOf(exec, lib);
}

/**
 * Whether an insert stalled past the table's timing assumption in this run: between its claim (a
 * compareExchange of a slot's ctrl word to a claim of its own) and its last step on that claim (the
 * compareExchange that publishes or abandons it), the clock moved the table's reuse age past the
 * reading its claim was stamped with, and the inserter took a step after that. Such an insert may
 * write over the slot's next occupant, as documented: the run is not judged. Unlike
 * `pastClaimAssumption`, a run whose clock moved that far while no insert was in flight is judged
 * (a lock holder stalled that long, a dead holder's key reclaimed).
 */
export function insertStalledPast(exec, lib) {
  const L = lib.layout;
  const slotWords = new Int32Array(exec.buffers[0])[L.H_SLOT_WORDS];
  const reuseMs = reuseAgeOf(exec, lib);
  const isCtrl = (buf, byte) => buf === 0 && (byte & 3) === 0 && (byte >> 2) >= L.HEADER_WORDS &&
    ((byte >> 2) - L.HEADER_WORDS) % slotWords === L.S_CTRL;
  const last = new Map(); // thread -> its last reading
  const open = new Map(); // thread -> { byte, word, reading } of its claim in flight
  let latest = -Infinity;
  for (const e of exec.trace) {
    if (e.kind === 'clock') {
      last.set(e.thread, e.result);
      latest = Math.max(latest, e.result);
      continue;
    }
    const claim = open.get(e.thread);
    if (claim !== undefined && latest - claim.reading >= reuseMs) return true;
    if (e.kind !== 'cas' || !isCtrl(e.buf, e.byte)) continue;
    if (claim !== undefined && e.byte === claim.byte && e.a0 === claim.word) open.delete(e.thread);
    const cancels = ((e.a1 >>> 2) & L.CLAIM_CANCELLED) !== 0;
    if (e.result === e.a0 && (e.a1 & 3) === L.BUSY && !cancels) open.set(e.thread, { byte: e.byte, word: e.a1, reading: last.get(e.thread) });
  }
  return false;
}

/** lockedLogVerdict's outcome of calls labelled 'allow' (cost 1) and 'reset' (its answer: whether the key owed anything). */
export function resetOrAllow(c) {
  if (c.error !== null) return null;
  if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
  if (c.label === 'reset') return { key: 'k', cost: 0, admitted: true, op: 'reset', owed: c.result === true };
  return null;
}

/**
 * The verdict of a two-per-second log scenario whose calls `outcome` maps (locked-reset,
 * locked-controls): one live copy of key 'k', no lock taken over before it was stale, and every
 * call against the exact sliding log; refusals judged only in runs without a takeover, as in
 * locked-log (a holder that stalled past the steal age leaves the log more conservative).
 */
export function lockedLogVerdict(exec, lib, outcome) {
  const lockOf = lockWordsOf(exec, lib);
  if (lockOf === null) return null; // outside the table's documented range
  const tookOver = anyTakeover(exec, lib, lockOf);
  const v = linearizable(callsOf(exec), slidingLogModel({ permits: 2, periodMs: 1000 }, { slackMs: 2e-5 }), outcome, { since: exec.startMs });
  return liveCopies(exec.buffers[0], lib, ['k']) ??
    lockTakeovers(exec, lib, STEAL_MS, lockOf) ??
    (v !== null && tookOver && v.startsWith('phantom refusal') ? null : v);
}
