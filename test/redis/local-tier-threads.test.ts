// The local tier across real worker threads (attached from its handle, running dist/): races that
// must lose compare-and-swaps yet count exactly, threads parked at chosen steps of take, offer,
// refuseUntil and a refill, and worker.terminate() at random moments. Every tier runs on a
// ManualClock shared with the workers; real time only decides where a terminate() lands.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/time/clock.js';
import { LocalTier } from '../../src/redis/local-tier.js';
import { ANSWER_WINDOW_MS, NONE } from '../../src/redis/local-tier-slot.js';
import { leaseOf, liveSlots, parkFlags, release, sleep, startWorker, whenParked } from '../helpers/local-tier.js';
import { openGate } from '../helpers/workers.js';
import { stagedReuse, STORM_REUSE_MS } from '../helpers/park.js';
import { soakOr } from '../helpers/soak.js';
import type { REUSE_AFTER_MS_OPTION } from '../../src/table/table-options.js';


interface Report { result?: boolean; spent?: number; casLosses: number; lateSpends: number }

function tierAt(
  ms: number, leaseMs: number,
  more: { refillTimeoutMs?: number; maxKeys?: number; forceHash?: number; claimTimeoutMs?: number; [REUSE_AFTER_MS_OPTION]?: number } = {},
) {
  const clock = new ManualClock(ms);
  return { clock, tier: LocalTier.create({ clock, leaseMs, ...more }) };
}

/** Starts a worker that makes one call on a tier whose clock parks it at reading `parkAt`. */
function parkedCall(tier: LocalTier, parkAt: number, readFirst: boolean, call: string, args: unknown[]) {
  const flags = parkFlags();
  const started = startWorker({ mode: 'park', handle: tier.handle, flags: flags.buffer, parkAt, readFirst, call, args });
  return { flags, reply: started.next<Report>(), worker: started.worker };
}

function takeAll(tier: LocalTier, key: string): number {
  let n = 0;
  while (tier.take(key)) n++;
  return n;
}

/** Runs 4 workers released together by one gate; returns their reports. */
async function race(data: (id: number) => Record<string, unknown>): Promise<Report[]> {
  const gate = new SharedArrayBuffer(8);
  const workers = Array.from({ length: 4 }, (_, id) => startWorker({ ...data(id), gate }));
  await openGate(gate, 4);
  const reports = await Promise.all(workers.map((w) => w.next<Report>()));
  await Promise.all(workers.map((w) => w.worker.terminate()));
  return reports;
}

const lost = (reports: Report[]) => reports.reduce((sum, r) => sum + r.casLosses, 0);

// Each round is checked exactly; rounds repeat (up to 8) until the workers were seen to collide,
// which on a busy two-core host can take more than one.
describe('racing workers', () => {
  it.each([1, 3])('4 workers taking cost %i from one lease spend exactly the permits offered, losing CAS races', async (cost) => {
    let losses = 0;
    for (let round = 0; round < 8 && losses === 0; round++) {
      const { tier } = tierAt(1_000, 60_000);
      const permits = 150_000;
      expect(tier.offer('hot', permits, 1_000)).toBe(true);
      const reports = await race(() => ({ mode: 'race', handle: tier.handle, key: 'hot', cost }));
      expect(reports.reduce((sum, r) => sum + (r.spent as number), 0)).toBe(permits);
      expect(reports.every((r) => r.lateSpends === 0)).toBe(true);
      expect(leaseOf(tier, 'hot')?.field).toBe(0);
      losses += lost(reports);
    }
    expect(losses).toBeGreaterThan(0);
  });

  it('4 workers raising one refusal leave the longest, losing CAS races', async () => {
    let losses = 0;
    for (let round = 0; round < 8 && losses === 0; round++) {
      const { tier } = tierAt(1_000, 1_000);
      const reports = await race((id) => ({
        mode: 'refuse-race', handle: tier.handle, key: 'k', untils: Array.from({ length: 20_000 }, (_, j) => 2_000 + j * 4 + id),
      }));
      expect(tier.refusedFor('k', 1_000)).toBe(2_000 + 19_999 * 4 + 3 - 1_000);
      losses += lost(reports);
    }
    expect(losses).toBeGreaterThan(0);
  });
});

describe('a take parked at a chosen step', () => {
  it('between its reading and its CAS, past the expiry: the permit is spent, not admitted', async () => {
    const { clock, tier } = tierAt(1_000, 100);
    tier.offer('k', 10, 1_000);
    const { flags, reply, worker } = parkedCall(tier, 1, true, 'take', ['k', 1]);
    await whenParked(flags);
    clock.set(1_100); // the lease expires while the thread sits before its compare-and-swap
    release(flags);
    const r = await reply;
    await worker.terminate();
    expect(r).toMatchObject({ result: false, lateSpends: 1, casLosses: 0 });
    expect(leaseOf(tier, 'k')?.field).toBe(9);
  });

  it('between its reading and its CAS while others spend: it loses the race, and exactly the permits pass', async () => {
    const { tier } = tierAt(1_000, 100);
    tier.offer('k', 10, 1_000);
    const { flags, reply, worker } = parkedCall(tier, 1, true, 'take', ['k', 1]);
    await whenParked(flags);
    expect(takeAll(tier, 'k')).toBe(10);
    release(flags);
    const r = await reply;
    await worker.terminate();
    expect(r).toMatchObject({ result: false, casLosses: 1, lateSpends: 0 });
  });

  it.each([
    ['past the expiry', (clock: ManualClock) => clock.set(1_100), false],
    ['across a clear()', (_clock: ManualClock, tier: LocalTier) => tier.clear(), false],
    ['neither (control)', () => undefined, true],
  ] as const)('after its CAS, before its reading, %s', async (_name, meanwhile, admitted) => {
    const { clock, tier } = tierAt(1_000, 100);
    tier.offer('k', 10, 1_000);
    const { flags, reply, worker } = parkedCall(tier, 2, false, 'take', ['k', 1]);
    await whenParked(flags);
    meanwhile(clock, tier);
    release(flags);
    const r = await reply;
    await worker.terminate();
    expect(r).toMatchObject({ result: admitted, lateSpends: admitted ? 0 : 1 });
    expect(leaseOf(tier, 'k')?.field).toBe(9);
  });
});

describe('a refiller parked', () => {
  it('for ever: another takes over after refillTimeoutMs, and no permit outlives its lease', async () => {
    const { clock, tier } = tierAt(10_000, 100, { refillTimeoutMs: 50 });
    const flags = parkFlags();
    const stalled = startWorker({ mode: 'refiller', handle: tier.handle, flags: flags.buffer, key: 'k', permits: 7 });
    expect((await stalled.next<{ began: boolean }>()).began).toBe(true);
    await whenParked(flags);
    expect(tier.beginRefill('k')).toBe(false);
    clock.set(10_049);
    expect(tier.beginRefill('k')).toBe(false);
    clock.set(10_050);
    expect(tier.beginRefill('k')).toBe(true); // taken over
    expect(tier.offer('k', 5, 10_050)).toBe(true);
    expect(tier.endRefill('k')).toBe(true);
    expect([tier.take('k'), tier.take('k')]).toEqual([true, true]);
    clock.set(10_149.9);
    expect(tier.take('k')).toBe(true);
    clock.set(10_150);
    expect(tier.take('k')).toBe(false); // 2 permits left, past their lease's expiry
    await stalled.worker.terminate(); // it never came back
    expect(tier.beginRefill('k')).toBe(true); // refills go on
  });

  it('then resuming: an older lease is refused, a newer one replaces what is left until its own expiry', async () => {
    for (const late of [false, true]) {
      const { clock, tier } = tierAt(10_000, 100, { refillTimeoutMs: 50 });
      const flags = parkFlags();
      // late: it stopped before asking Redis, and asks at 10,060 once it resumes.
      const stalled = startWorker({ mode: 'refiller', handle: tier.handle, flags: flags.buffer, key: 'k', permits: 7, ...(late ? { askedAt: 10_060 } : {}) });
      expect((await stalled.next<{ began: boolean }>()).began).toBe(true);
      await whenParked(flags);
      clock.set(10_060);
      expect(tier.beginRefill('k')).toBe(true);
      expect(tier.offer('k', 5, 10_055)).toBe(true);
      expect(tier.take('k')).toBe(true);
      release(flags);
      expect(await stalled.next()).toEqual({ published: late, ended: false });
      await stalled.worker.terminate();
      expect(takeAll(tier, 'k')).toBe(late ? 7 : 4);
      expect(tier.offer('k', 3, 10_060)).toBe(true);
      clock.set(10_160);
      expect(tier.take('k')).toBe(false);
    }
  });

  it('inside its offer, between its load and its CAS: it lands nothing on a newer lease', async () => {
    const { clock, tier } = tierAt(1_000, 100);
    tier.beginRefill('k'); // 'k' exists: the parked reading #1 is the one after the lease's load
    tier.endRefill('k');
    const { flags, reply, worker } = parkedCall(tier, 1, true, 'offer', ['k', 5, 1_000]);
    await whenParked(flags);
    clock.set(1_010);
    expect(tier.offer('k', 3, 1_010)).toBe(true);
    release(flags);
    const r = await reply;
    await worker.terminate();
    expect(r).toMatchObject({ result: false, casLosses: 1 });
    expect(takeAll(tier, 'k')).toBe(3);
  });
});

describe('a writer parked while its key is reclaimed and its slot given to another key', () => {
  it.each([
    ['refuseUntil', ['a', 20_500]],
    ['offer', ['a', 5, 1_000]],
  ] as const)('%s lands nothing in the other key; it writes its own key anew', async (call, args) => {
    const { clock, tier } = tierAt(1_000, 60_000, { maxKeys: 2, forceHash: 9 });
    tier.beginRefill('a'); // 'a' exists before the parked call: its reading #1 is after the loads
    tier.endRefill('a');
    const { flags, reply, worker } = parkedCall(tier, 1, true, call, [...args]);
    await whenParked(flags);
    clock.set(1_001 + ANSWER_WINDOW_MS);
    expect(tier.sweep()).toBe(1);
    expect(tier.refuseUntil('b', clock.now() + 300)).toBe(true);
    expect(tier.offer('b', 3, clock.now())).toBe(true);
    expect(liveSlots(tier).map((s) => s.key)).toEqual(['b']); // in the slot 'a' had
    release(flags);
    const r = await reply;
    await worker.terminate();
    expect(r).toMatchObject({ result: true, casLosses: 1 });
    expect(tier.refusedFor('b', clock.now())).toBe(300);
    expect(takeAll(tier, 'b')).toBe(3);
    if (call === 'offer') expect(takeAll(tier, 'a')).toBe(5);
    else expect(tier.refusedFor('a', clock.now())).toBe(20_500 - clock.now());
  });
});

describe('worker.terminate() at random moments', () => {
  it('leaves the tier usable: one copy per key, no more taken than offered, exact counts after', async () => {
    // The claims of dead inserters are reused once STORM_REUSE_MS old (the table's reuseAfterMs:
    // by default 30 s at least), which the checks after the storm wait out.
    const { clock, tier } = tierAt(1_000_000, 200, { maxKeys: 48, refillTimeoutMs: 5, ...stagedReuse(1, STORM_REUSE_MS) });
    const hot = ['h0', 'h1', 'h2'];
    const counters = new SharedArrayBuffer(8);
    let seed = 0x2545f491;
    const rand = () => ((seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0) >>> 0) / 2 ** 32;
    const errors: unknown[] = [];
    let kills = 0;
    // Rounds of four workers: 6 under npm test, 12 under test:soak. Every third round moves the
    // clock past the answer window, so that later rounds race reclaims of idle entries.
    const ROUNDS = soakOr(6, 12);
    for (let round = 0; round < ROUNDS; round++) {
      const gate = new SharedArrayBuffer(8);
      const workers = Array.from({ length: 4 }, (_, id) => startWorker({
        mode: 'storm', handle: tier.handle, gate, counters, hot, pool: 24, id, seed: (round * 4 + id + 1) * 0x9e3779b9,
      }));
      for (const w of workers) w.worker.on('error', (e) => errors.push(e));
      await openGate(gate, 4);
      for (const w of workers) {
        await sleep(rand() * 12);
        await w.worker.terminate();
        kills++;
      }
      if (round % 3 === 2) clock.advance(2 * ANSWER_WINDOW_MS); // every entry idle: reclaims under way
    }
    expect(errors).toEqual([]);
    expect(kills).toBe(4 * ROUNDS);
    const count = new Int32Array(counters);
    expect(count[1]).toBeGreaterThan(0);
    expect(count[1]).toBeLessThanOrEqual(count[0] as number);
    const keys = liveSlots(tier).map((s) => s.key);
    expect(new Set(keys).size).toBe(keys.length); // no key has two live copies
    // Every lease and refusal over: each hot key takes a fresh lease exactly, and refuses exactly.
    clock.advance(2 * ANSWER_WINDOW_MS);
    const now = clock.now();
    for (const k of hot) {
      expect(tier.offer(k, 25, now)).toBe(true);
      expect(takeAll(tier, k)).toBe(25);
      expect(tier.refuseUntil(k, now + 100)).toBe(true);
      expect(tier.refusedFor(k, now)).toBe(100);
      expect(tier.beginRefill(k)).toBe(true);
    }
    // Once idle, and the claims dead inserters left are STORM_REUSE_MS old, sweep empties it.
    clock.advance(2 * ANSWER_WINDOW_MS);
    await sleep(STORM_REUSE_MS + 10);
    tier.sweep();
    expect(tier.stats()).toMatchObject({ liveKeys: 0, claimed: 0 });
    expect(leaseOf(tier, 'h0')).toBeUndefined();
    expect(NONE).toBe(0xfffff);
  });
});
