// ConcurrencyLimiter.reset (src/concurrency/: under the key lock, the key's floor word raised to
// the latest stamp held, lastSec first) against acquires under the same lock and a lock-free
// release (compareExchange from the lease's own stamp), with maxInFlight 1 and a 500 ms lease.
// Thread 0 acquires and releases; thread 1 resets the key, then acquires twice. The hazard: a
// lease taken before a reset and released after it must not free the place a lease taken after
// the reset holds, even in the same tick (a new stamp always lies above the floor).
// Checked (leaseCheck, with its resets): never more leases of the key surely held than maxInFlight
// at any step, where a lease is no longer surely held once a reset that may have followed its
// acquire has ended; no acquire refused while fewer were possibly held (a lease whose acquire
// ended before a reset began is surely freed once that reset has ended); one live copy of the key.
import { liveCopies } from './common.mjs';
import { leaseCheck, lockMoves, pastClaimAssumption, STAGED_REUSE, tableNames } from './_locks.mjs';

const MAX_IN_FLIGHT = 1;
const LEASE_MS = 500;
const STEAL_MS = 100;

const acquire = (cl, key) => {
  const d = cl.tryAcquire(key);
  return { lease: d.lease, result: { allowed: d.allowed, expiresAtMs: d.lease?.expiresAtMs ?? 0 } };
};

export default {
  name: 'lease-reset',
  what: 'ConcurrencyLimiter reset (the floor word under the key lock) against acquires and a late release',
  time: lockMoves({ startMs: 4999.75, tickMs: 1e-3, stealAfterMs: STEAL_MS, periodMs: LEASE_MS }),
  mayWait: true,
  maxSteps: 3000,
  setup(lib) {
    const cl = new lib.ConcurrencyLimiter({ maxInFlight: MAX_IN_FLIGHT, leaseMs: LEASE_MS, maxKeys: 4, claimTimeoutMs: STEAL_MS, hashSeed: 7, ...STAGED_REUSE });
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
      ctx.call('reset k', () => cl.reset('k'));
      ctx.call('acquire k', () => acquire(cl, 'k').result);
      ctx.call('acquire k', () => acquire(cl, 'k').result);
    },
  ],
  names: tableNames,
  check(exec, lib) {
    if (pastClaimAssumption(exec, lib, 4999.75)) return null; // outside the table's documented range
    return liveCopies(exec.buffers[0], lib, ['k']) ?? leaseCheck(exec, MAX_IN_FLIGHT);
  },
};
