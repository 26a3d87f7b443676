// A lease acquire stalled under its key lock across a reclaim and the slot's reuse
// (src/concurrency/concurrency-limiter.ts over underKeyLock and settle in
// src/table/slot-lock.ts): every key hashes alike (forceHash), so a key inserted after k's
// reclaim takes k's slot. One thread acquires k; the other sweeps (past a reclaim's wait, 30x the
// 100 ms steal age, it may take over the acquire's lock and reclaim k, which holds no place yet),
// acquires and releases j. Runs that move the clock past that wait are judged unless an insert
// was in flight across the move (insertStalledPast): a lock holder stalled that long must still
// leave every lease in its key's places. Checked: every lease granted and not released nor expired stands in a place of its
// key's live slot, never more than maxInFlight leases of a key surely held, no phantom refusal
// (but for a place the stalled acquire's stamp may hold in the next key's slot, which
// docs/design.md accepts), one live copy of each key, no lock taken over while fresh.
import { liveCopies } from './common.mjs';
import {
  insertStalledPast, leaseCheck, leasesInPlace, lockMoves, lockTakeovers, slotLockWord, STAGED_REUSE, tableNames,
} from './_locks.mjs';

const MAX_IN_FLIGHT = 1;
const LEASE_MS = 5_000; // longer than a reclaim's wait (30x the steal age): a reclaim need not expire the lease
const STEAL_MS = 100; // claimTimeoutMs, the locks' stealAfterMs: 30x it (3 s) bounds an insert's stall

const acquire = (cl, key) => {
  const d = cl.tryAcquire(key);
  return { lease: d.lease, result: { allowed: d.allowed, expiresAtMs: d.lease?.expiresAtMs ?? 0 } };
};

export default {
  name: 'lease-reuse',
  what: 'an acquire holding the key lock against sweep (retireLocked takeover), reuse of the slot by another key, settle',
  // And past a reclaim's wait (30x the steal age): only then may the sweep take the acquire's
  // lock over and reclaim k.
  time: (({ startMs, moves }) => ({ startMs, moves: [...moves, { name: 'past reclaim wait', to: (now) => now + 30 * STEAL_MS + 2 }] }))(
    lockMoves({ startMs: 4999.75, tickMs: 1e-3, stealAfterMs: STEAL_MS, periodMs: LEASE_MS })),
  // One stall across a reclaim and a reuse takes one preemption and one clock move; two
  // preemptions over runs of 50 to 90 steps do not fit the CI budget (--deep takes three).
  bounds: { ci: { preemptions: 1 } },
  mayWait: true,
  maxSteps: 4000,
  setup(lib) {
    const cl = new lib.ConcurrencyLimiter({
      maxInFlight: MAX_IN_FLIGHT, leaseMs: LEASE_MS, maxKeys: 2, claimTimeoutMs: STEAL_MS, hashSeed: 7, forceHash: 1, ...STAGED_REUSE,
    });
    return { buffers: [cl.handle.table], data: { handle: cl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const cl = lib.ConcurrencyLimiter.attach(handle);
      cl.tryAcquire('k', 0); // set-up: k is inserted, no place held
      ctx.ready();
      ctx.call('acquire k', () => acquire(cl, 'k').result);
    },
    (ctx, { handle }, lib) => {
      const cl = lib.ConcurrencyLimiter.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => cl.sweep());
      let lease = null;
      ctx.call('acquire j', () => { const a = acquire(cl, 'j'); lease = a.lease; return a.result; });
      if (lease !== null) ctx.call('release', () => lease.release());
    },
  ],
  names: tableNames,
  check(exec, lib) {
    if (insertStalledPast(exec, lib)) return null; // outside the table's documented range
    const isLock = slotLockWord(exec.buffers[0], lib);
    return liveCopies(exec.buffers[0], lib, ['k', 'j']) ??
      lockTakeovers(exec, lib, STEAL_MS, (buf, byte) => buf === 0 && isLock(byte)) ??
      leasesInPlace(exec, lib, ['k', 'j'], { maxInFlight: MAX_IN_FLIGHT, tickMs: 1e-3 }) ??
      leaseCheck(exec, MAX_IN_FLIGHT, { strayLeaseMs: LEASE_MS });
  },
};
