// A PolicyLimiter reshape stalled under its pair's lock across a reclaim and the slot's reuse by
// another pair (src/policy/pair-shape.ts, shapePair under underKeyLock in src/table/slot-lock.ts).
// Pair k was shaped under the first rules (the default, one GCRA limit of 1 an hour) and is idle;
// the rules then give user k a fixed window (another shape). Pair j (user VICTIM, found at
// set-up) hashes to k's home slot and keeps the default rule, so once k is reclaimed, j inserted
// next takes k's slot. Thread 0 checks k (a reshape: it reads k's words, checks its lock, writes a
// fresh fixed window by compareExchange from what it read), then j; thread 1 sweeps (past a
// reclaim's wait, 30x the 100 ms steal age, it may take thread 0's lock over and reclaim k), then
// checks j.
// Checked: one live copy of each pair, no lock taken over while fresh, and every check against
// exact models (k: the fixed window of 2 an hour; j: GCRA, 1 an hour); refusals only in runs
// without a takeover. A run in which a holder taken over wrote a word of its slot from a value it
// had read before the takeover is not judged: docs/design.md, "A reclaim waits far longer than a
// decision", documents that a holder stalled that long between its lock check and its writes may
// write into the slot's next key. A holder that read the next key's words after the takeover and
// wrote them (no lock check between) is the bug this scenario exists for (fix f353f07).
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies } from './common.mjs';
import {
  anyTakeover, insertStalledPast, liveSlotsOf, LOCKED_START_MS, lockMoves, lockTakeovers, slotLockWord, STAGED_REUSE, STEAL_MS,
  tableNames,
} from './_locks.mjs';
import { fixedWindowModel, tickEarly } from './_windows.mjs';

const HOUR = 3_600_000;
const API = 'a';
const K = { user: 'k', api: API };
const gcraLimit = { permits: 1, periodMs: HOUR, burst: 1 };
const windowLimit = { permits: 2, periodMs: HOUR };
const FIRST = [{ limit: gcraLimit }];
const SECOND = [...FIRST, { user: 'k', algorithm: 'fixed-window', limit: windowLimit }];
const OPTIONS = { maxKeys: 2, claimTimeoutMs: STEAL_MS, hashSeed: 7, ...STAGED_REUSE };
/** The pair's key in the table (PolicyLimiter's encoding: the user's length, the user, the api). */
const tableKey = ({ user, api }) => `${user.length}:${user}${api}`;

/** A user whose pair (with API) takes k's slot in an empty table; found once per build. */
const victims = new Map();
function victimOf(lib) {
  let v = victims.get(lib);
  if (v !== undefined) return v;
  const slotOf = (pair) => {
    const pl = new lib.PolicyLimiter({ rules: FIRST, ...OPTIONS });
    pl.tryAcquire(pair, 0);
    return liveSlotsOf(pl.handle.table, lib, tableKey(pair))[0];
  };
  const home = slotOf(K);
  for (let i = 0; i < 2000 && v === undefined; i++) if (slotOf({ user: `v${i}`, api: API }) === home) v = `v${i}`;
  if (v === undefined) throw new Error('policy-reshape-reuse: no user of 2,000 shares k\'s slot');
  victims.set(lib, v);
  return v;
}

/**
 * Whether a lock holder whose token was taken over later wrote a word of that slot (other than
 * the lock word) from a snapshot: its last read of that word came before the takeover. That is
 * the stall docs/design.md leaves open (past the reclaim's wait, between a holder's lock check and
 * its writes), not judged here.
 */
function staleSnapshotWrite(exec, lib) {
  const L = lib.layout;
  const w = new Int32Array(exec.buffers[0]);
  const slotWords = w[L.H_SLOT_WORDS];
  const isLock = slotLockWord(exec.buffers[0], lib);
  const slotOf = (byte) => Math.floor(((byte >> 2) - L.HEADER_WORDS) / slotWords);
  const holder = new Map(); // `${byte}:${token}` -> thread
  const takenAt = new Map(); // `${thread}:${slot}` -> step of the first takeover of its token there
  const lastRead = new Map(); // `${thread}:${byte}` -> step
  for (const e of exec.trace) {
    if (e.buf !== 0 || e.kind === 'clock') continue;
    const slot = slotOf(e.byte);
    if (isLock(e.byte)) {
      if (e.kind !== 'cas' || e.result !== e.a0) continue;
      const from = holder.get(`${e.byte}:${e.a0}`);
      if (from !== undefined && from !== e.thread && !takenAt.has(`${from}:${slot}`)) takenAt.set(`${from}:${slot}`, e.step);
      if ((e.a1 & 1) === 1 && e.a1 !== L.DEAD) holder.set(`${e.byte}:${e.a1}`, e.thread);
      continue;
    }
    if (e.kind === 'load' || e.kind === 'read') { lastRead.set(`${e.thread}:${e.byte}`, e.step); continue; }
    const wrote = e.kind === 'store' || e.kind === 'write' || (e.kind === 'cas' && e.result === e.a0);
    const taken = takenAt.get(`${e.thread}:${slot}`);
    if (!wrote || taken === undefined || e.step < taken) continue;
    if ((lastRead.get(`${e.thread}:${e.byte}`) ?? -1) < taken) return true;
  }
  return false;
}

export default {
  name: 'policy-reshape-reuse',
  what: 'a PolicyLimiter reshape holding the pair lock against sweep (a takeover past the reclaim wait), reuse of the slot by another pair',
  // And past a reclaim's wait (30x the steal age): only then may the sweep take the check's lock
  // over and reclaim k. No move past the hour: the models then cover every run.
  time: (({ startMs, moves }) => ({
    startMs, moves: [...moves.slice(0, 3), { name: 'past reclaim wait', to: (now) => now + 30 * STEAL_MS + 2 }],
  }))(lockMoves({ startMs: LOCKED_START_MS, tickMs: 1e-5, stealAfterMs: STEAL_MS, periodMs: HOUR })),
  // One stall across a reclaim and a reuse: one preemption and one clock move (cost 2). Runs are
  // long (about 150 steps: two lookups, a sweep, three locked decisions), so CI's 3 s covers
  // cost 1 at most; the deep mode reaches the bug, and test/explore/explorer.test.ts replays it.
  bounds: { ci: { preemptions: 1, dfsBudgetMs: 3_000, pctRuns: 20 } },
  mayWait: true,
  maxSteps: 4000,
  setup(lib) {
    const victim = victimOf(lib);
    // k shaped under the first rules without a spend (idle), at the run's first reading (the
    // clock of this instance only), then user k gets a fixed window.
    const pl = new lib.PolicyLimiter({ rules: FIRST, ...OPTIONS, clock: { now: () => LOCKED_START_MS } });
    pl.tryAcquire(K, 0);
    pl.setRules(SECOND);
    return { buffers: [pl.handle.table, pl.handle.rules], data: { handle: pl.handle, victim } };
  },
  threads: [
    (ctx, { handle, victim }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle, { clock: performance });
      ctx.ready();
      ctx.call('allow k', () => pl.allow(K));
      ctx.call('allow j', () => pl.allow({ user: victim, api: API }));
    },
    (ctx, { handle, victim }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle, { clock: performance });
      ctx.ready();
      ctx.call('sweep', () => pl.sweep());
      ctx.call('allow j', () => pl.allow({ user: victim, api: API }));
    },
  ],
  names: (buffers, lib) => {
    const table = tableNames(buffers, lib);
    return (buf, byte) => (buf === 0 ? table(buf, byte) : `rules byte ${byte}`);
  },
  check(exec, lib) {
    if (insertStalledPast(exec, lib) || staleSnapshotWrite(exec, lib)) return null; // outside the documented range
    const victim = victimOf(lib);
    const isLock = slotLockWord(exec.buffers[0], lib);
    const lockOf = (buf, byte) => buf === 0 && isLock(byte);
    const models = { k: fixedWindowModel(windowLimit), j: tickEarly(gcraModel(gcraLimit, { refusalSlackMs: 1 }), 1) };
    const model = {
      init: () => ({ k: models.k.init(), j: models.j.init() }),
      judge(state, o, reading) {
        const j = models[o.key].judge(state[o.key], o, reading);
        return { ...j, next: { ...state, [o.key]: j.next } };
      },
    };
    const outcome = (c) => (c.label.startsWith('allow') && c.error === null ? { key: c.label.split(' ')[1], cost: 1, admitted: c.result === true } : null);
    const judgeRefusals = !anyTakeover(exec, lib, lockOf);
    return liveCopies(exec.buffers[0], lib, [tableKey(K), tableKey({ user: victim, api: API })]) ??
      lockTakeovers(exec, lib, STEAL_MS, lockOf) ??
      linearizable(callsOf(exec), model, outcome, { since: exec.startMs, judgeRefusals });
  },
};
