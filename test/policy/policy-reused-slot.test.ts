// Regression (failed before #prepare read everything, then checked its lock, then wrote): a
// PolicyLimiter decision parked under its pair's lock, after underKeyLock's ctrl check
// (at the first clock reading of LockedEngine.#run, the one handed to #prepare), while sweep()
// takes the lock over (past claimTimeoutMs), reclaims the idle pair, and another pair with a rule
// of another shape takes the slot. The parked decision resumes in #prepare. Before the fix it
// read the new pair's shape, judged the state to be of another rule, and wrote a fresh state of
// its own rule over it (every compareExchange from values it had just read succeeded): the
// victim's spends were gone, and it was admitted 4 times for a fixed window of 2 per hour.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { perHour, PolicyLimiter, type PolicyRule } from '../../src/index.js';
import { H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL, S_KEY_BYTES } from '../../src/table/layout.js';
import { keyOffsetOf } from '../../src/table/table.js';

const parkWorker = new URL('../fixtures/park-request-worker.mjs', import.meta.url);
const FROZEN_MS = 5_000;
const clock = { now: () => FROZEN_MS };

function pastTimeout(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** The first word of the slot holding `key` (its length-prefixed "user" + "api"), or -1. */
function slotOf(policy: PolicyLimiter, key: string): number {
  const w = new Int32Array(policy.handle.table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const want = new TextEncoder().encode(key);
  for (let base = HEADER_WORDS; base + slotWords <= w.length; base += slotWords) {
    if (((w[base + S_CTRL] as number) & 3) !== LIVE || w[base + S_KEY_BYTES] !== want.length) continue;
    const bytes = new Uint8Array(w.buffer, (base + keyOffsetOf(w)) * 4, want.length);
    if (bytes.every((b, i) => b === want[i])) return base;
  }
  return -1;
}

describe('a policy decision parked under its pair lock while sweep() reclaims the pair and another pair takes the slot', () => {
  it('must not overwrite the new pair\'s state (no over-admission of the new pair)', async () => {
    const base: PolicyRule[] = [{ limit: perHour(1) }]; // default: GCRA
    const options = { maxKeys: 8, claimTimeoutMs: 20, clock, hashSeed: 12345 };
    // A victim user whose pair has the same home slot as ('k', 'a'): it takes the reclaimed slot.
    const slotIndex = (p: PolicyLimiter, key: string) => {
      const w = new Int32Array(p.handle.table);
      return (slotOf(p, key) - HEADER_WORDS) / (w[H_SLOT_WORDS] as number);
    };
    const probe = new PolicyLimiter({ rules: base, ...options });
    probe.tryAcquire({ user: 'k', api: 'a' }, 0);
    const home = slotIndex(probe, '1:ka');
    let victim = '';
    for (let i = 0; i < 2000 && victim === ''; i++) {
      const p = new PolicyLimiter({ rules: base, ...options });
      p.tryAcquire({ user: `v${i}`, api: 'a' }, 0);
      if (slotIndex(p, `${`v${i}`.length}:v${i}a`) === home) victim = `v${i}`;
    }
    expect(victim).not.toBe('');
    const vKey = `${victim.length}:${victim}a`;
    const rules: PolicyRule[] = [...base, { user: victim, algorithm: 'fixed-window', limit: { permits: 2, periodMs: 3_600_000 } }];
    const policy = new PolicyLimiter({ rules, ...options });
    expect(policy.tryAcquire({ user: 'k', api: 'a' }, 0).allowed).toBe(true); // shaped, idle
    expect(slotIndex(policy, '1:ka')).toBe(home);

    const flags = new Int32Array(new SharedArrayBuffer(16));
    const worker = new Worker(parkWorker, {
      workerData: { kind: 'policy', handle: policy.handle, request: { user: 'k', api: 'a' }, cost: 1, parkAt: 1, flags: flags.buffer, frozenMs: FROZEN_MS },
    });
    const reply = new Promise<{ allowed: boolean; reason: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    // Parked at the first clock reading under the pair's lock: the one #prepare is given.
    while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));

    pastTimeout(30);
    expect(policy.sweep()).toBe(1); // took the parked worker's lock over: 'k' reclaimed
    let admitted = 0;
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
    expect(admitted).toBe(2);
    expect(slotIndex(policy, vKey)).toBe(home); // the victim lives in the reclaimed slot

    Atomics.store(flags, 1, 1);
    Atomics.notify(flags, 1);
    const late = await reply;
    await worker.terminate();
    expect(late.allowed).toBe(true); // decided again for 'k' in a new slot
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
    // A fixed window of 2 per hour, the clock frozen: 2 admitted in all.
    expect(admitted).toBe(2);
  });
});
