// ConcurrencyLimiter.reset (src/concurrency/: under the key lock, the key's floor word raised to
// the latest stamp held, lastSec first) against acquires under the same lock and a lock-free
// release (compareExchange from the lease's own stamp), with maxInFlight 1 and a 500 ms lease.
// Thread 0 acquires and releases; thread 1 resets the key, then acquires twice. The hazard: a
// lease taken before a reset and released after it must not free the place a lease taken after
// the reset holds, even in the same tick (a new stamp always lies above the floor).
// Checked: never more leases of the key surely held than maxInFlight at any step, where a lease
// is no longer surely held once a reset that may have followed its acquire has ended; no acquire
// refused while fewer were possibly held (a lease whose acquire ended before a reset began is
// surely freed once that reset has ended); one live copy of the key.
import { liveCopies } from './common.mjs';
import { lockMoves, pastClaimAssumption, tableNames } from './_locks.mjs';

const MAX_IN_FLIGHT = 1;
const LEASE_MS = 500;
const STEAL_MS = 100;
const SLACK_MS = 1e-6;

const acquire = (cl, key) => {
  const d = cl.tryAcquire(key);
  return { lease: d.lease, result: { allowed: d.allowed, expiresAtMs: d.lease?.expiresAtMs ?? 0 } };
};

/** leaseCheck (_locks.mjs) with resets: what a reset frees no longer counts as held. */
function leaseResetCheck(exec) {
  const leases = [];
  const acquires = [];
  const resets = [];
  for (const r of exec.reports) {
    let mine = null;
    r.calls.forEach((c, i) => {
      const name = `T${r.thread}.${i}`;
      if (c.error !== null) { mine = null; return; }
      if (c.label === 'reset') resets.push(c);
      else if (c.label === 'acquire') {
        const a = { name, call: c };
        acquires.push(a);
        if (c.result.allowed) { mine = { ...a, release: null }; leases.push(mine); }
      } else if (c.label === 'release' && mine !== null) {
        mine.release = c;
        mine = null;
      }
    });
  }
  const now = [];
  let t = exec.trace.find((e) => e.kind === 'clock')?.result ?? -Infinity;
  for (const e of exec.trace) { if (e.kind === 'clock') t = Math.max(t, e.result); now.push(t); }
  // A reset ended by step s that did not end before the lease's acquire began may have freed it.
  const mayBeFreed = (l, s) => resets.some((r) => r.lastStep <= s && r.lastStep >= l.call.firstStep);
  for (let s = 0; s < exec.trace.length; s++) {
    const held = leases.filter((l) => l.call.lastStep <= s && s < (l.release?.firstStep ?? Infinity)
      && now[s] < l.call.result.expiresAtMs - SLACK_MS && !mayBeFreed(l, s));
    if (held.length > MAX_IN_FLIGHT) {
      return `over-admission: at step ${s} (clock ${now[s]}) leases ${held.map((l) => l.name).join(', ')} all hold key k (maxInFlight ${MAX_IN_FLIGHT})`;
    }
  }
  for (const a of acquires) {
    if (a.call.result.allowed) continue;
    const { firstStep: f, lastStep: l, readings } = a.call;
    // Surely freed by a reset: one that began after the lease was taken and ended before this acquire began.
    const freed = (x) => resets.some((r) => r.firstStep > x.call.lastStep && r.lastStep < f);
    const possibly = leases.filter((x) => x !== a && x.call.firstStep <= l && !freed(x)
      && !(x.release !== null && x.release.result === true && x.release.lastStep < f)
      && readings.some((r) => r < x.call.result.expiresAtMs + SLACK_MS));
    if (possibly.length < MAX_IN_FLIGHT) {
      return `phantom refusal: ${a.name} acquire refused at ${readings.join('/')} (steps ${f}-${l}), ${possibly.map((x) => x.name).join(', ') || 'no lease'} possibly held`;
    }
  }
  return null;
}

export default {
  name: 'lease-reset',
  what: 'ConcurrencyLimiter reset (the floor word under the key lock) against acquires and a late release',
  time: lockMoves({ startMs: 4999.75, tickMs: 1e-3, stealAfterMs: STEAL_MS, periodMs: LEASE_MS }),
  mayWait: true,
  maxSteps: 3000,
  setup(lib) {
    const cl = new lib.ConcurrencyLimiter({ maxInFlight: MAX_IN_FLIGHT, leaseMs: LEASE_MS, maxKeys: 4, claimTimeoutMs: STEAL_MS, hashSeed: 7 });
    return { buffers: [cl.handle.table], data: { handle: cl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const cl = lib.ConcurrencyLimiter.attach(handle);
      ctx.ready();
      let lease = null;
      ctx.call('acquire', () => { const a = acquire(cl, 'k'); lease = a.lease; return a.result; });
      if (lease !== null) ctx.call('release', () => lease.release());
    },
    (ctx, { handle }, lib) => {
      const cl = lib.ConcurrencyLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset', () => cl.reset('k'));
      ctx.call('acquire', () => acquire(cl, 'k').result);
      ctx.call('acquire', () => acquire(cl, 'k').result);
    },
  ],
  names: tableNames,
  check(exec, lib) {
    if (pastClaimAssumption(exec, 4999.75, STEAL_MS)) return null; // outside the table's documented range
    return liveCopies(exec.buffers[0], lib, ['k']) ?? leaseResetCheck(exec);
  },
};
