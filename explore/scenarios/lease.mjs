// Leases (src/concurrency/): ConcurrencyLimiter acquires under the key lock (underKeyLock, the
// places read, the lock checked, stamps by compareExchange, settle) against lock-free releases
// (compareExchange from the lease's own stamp), with maxInFlight 1, a 500 ms lease and a 100 ms
// claim timeout: a clock move can expire a lease, or cross the lock's steal age while an acquire
// holds it. Checked: never more leases of a key surely held than maxInFlight at any step (from
// the calls' results, their steps and the clock), no acquire refused while fewer were possibly
// held, every lease standing at the end in a place of the key's slot, one live copy of the key.
import { liveCopies } from './common.mjs';
import {
  leaseCheck, leasesInPlace, lockMoves, lockTakeovers, pastClaimAssumption, slotLockWord, STAGED_REUSE, tableNames,
} from './_locks.mjs';

const MAX_IN_FLIGHT = 1;
const LEASE_MS = 500; // longer than the steal age: a takeover need not expire the lease
const STEAL_MS = 100; // claimTimeoutMs, the locks' stealAfterMs: 30x it (3 s) bounds an insert's stall

const acquire = (cl, key) => {
  const d = cl.tryAcquire(key);
  return { lease: d.lease, result: { allowed: d.allowed, expiresAtMs: d.lease?.expiresAtMs ?? 0 } };
};

export default {
  name: 'lease',
  what: 'ConcurrencyLimiter acquire (key lock, places, stamps, settle), release (own-stamp CAS), expiry by a clock move',
  time: lockMoves({ startMs: 4999.75, tickMs: 1e-3, stealAfterMs: STEAL_MS, periodMs: LEASE_MS }),
  mayWait: true,
  maxSteps: 3000,
  setup(lib) {
    const cl = new lib.ConcurrencyLimiter({
      maxInFlight: MAX_IN_FLIGHT, leaseMs: LEASE_MS, maxKeys: 4, claimTimeoutMs: STEAL_MS, hashSeed: 7, ...STAGED_REUSE,
    });
    return { buffers: [cl.handle.table], data: { handle: cl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const cl = lib.ConcurrencyLimiter.attach(handle);
      ctx.ready();
      let lease = null;
      ctx.call('acquire k', () => { const a = acquire(cl, 'k'); lease = a.lease; return a.result; });
      if (lease !== null) ctx.call('release', () => lease.release());
    },
    (ctx, { handle }, lib) => {
      const cl = lib.ConcurrencyLimiter.attach(handle);
      ctx.ready();
      ctx.call('acquire k', () => acquire(cl, 'k').result);
      ctx.call('acquire k', () => acquire(cl, 'k').result);
    },
  ],
  names: tableNames,
  check(exec, lib) {
    if (pastClaimAssumption(exec, lib, 4999.75)) return null; // outside the table's documented range
    const isLock = slotLockWord(exec.buffers[0], lib);
    return liveCopies(exec.buffers[0], lib, ['k']) ??
      lockTakeovers(exec, lib, STEAL_MS, (buf, byte) => buf === 0 && isLock(byte)) ??
      leasesInPlace(exec, lib, ['k'], { maxInFlight: MAX_IN_FLIGHT, tickMs: 1e-3 }) ??
      leaseCheck(exec, MAX_IN_FLIGHT);
  },
};
