import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, perHour, RateLimiter, type RateLimiterHandle } from '../../src/index.js';
import { BUSY, H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL } from '../../src/table/layout.js';
import { stagedReuse } from '../helpers/park.js';
import { HASHED_LAYOUT } from '../helpers/layout.js';

// Regression tests for a key with two live copies: an inserter stalled between its re-scan and
// its publish for longer than claimTimeoutMs had its claim presumed dead by a second inserter of
// the same key, which inserted the key again, and the stalled publish still succeeded (20
// admitted for burst 10, liveKeys 2).
//
// The stall is made exact, not timed: the stalled inserter runs in a worker
// (fixtures/claim-worker.mjs, over dist/) whose clock blocks on its first reading, which a new key
// makes in `initSlot`, after the re-scan and before the publish. The limiter's time is a
// ManualClock that every thread shares and that stays frozen unless a test advances it. Claim
// stamps are real time (performance.now()), so the tests wait, as a precondition, until a claim is
// older than claimTimeoutMs (or 30 times that); every assertion is about decisions and slot
// states, none about how long anything took.

const workerUrl = new URL('../fixtures/claim-worker.mjs', import.meta.url);
/** Generous for a worker's start-up on a busy machine. */
const DEADLINE_MS = 10_000;
/** Burst 10 (10 per hour): on a frozen clock a key admits exactly 10, a second copy 10 more. */
const LIMIT = perHour(10);
/** How many claim timeouts a table made with stagedReuse lets an expired claim sit before reusing its slot. */
const REUSE_AFTER_TIMEOUTS = 30;

/** Blocks this thread until real time reaches `t` (performance.now() ms): a precondition only. */
function waitUntil(t: number): void {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let left = t - performance.now(); left > 0; left = t - performance.now()) Atomics.wait(cell, 0, 0, left);
}

interface Parked {
  /** Real time before the worker's insert began: its claim stamp is no earlier. */
  startedAt: number;
  /** Real time when it parked: its claim stamp is no later. */
  parkedAt: number;
  /** Lets the worker publish (or fail to) and make its requests; resolves with its reply. */
  release(): Promise<{ admitted: number; clockCalls: number }>;
}

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.terminate()));
});

/** Starts `tries` requests on `key` in a worker; resolves once its insert is parked holding its claim. */
async function parkedInsert(handle: RateLimiterHandle, key: string, tries: number): Promise<Parked> {
  const signals = new SharedArrayBuffer(24);
  const flags = new Int32Array(signals, 0, 2);
  const times = new Float64Array(signals, 8, 2);
  const worker = new Worker(workerUrl, { workerData: { handle, key, tries, parkAtCall: 1, signals } });
  workers.push(worker);
  let failure: unknown = null;
  const reply = new Promise<{ admitted: number; clockCalls: number }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', (e) => { failure = e; reject(e); });
    worker.once('exit', (code) => { failure ??= new Error(`the worker exited (${code})`); reject(failure); });
  });
  reply.catch(() => {}); // seen through `failure` while parking, and by release()
  const deadline = performance.now() + DEADLINE_MS;
  while (Atomics.load(flags, 0) === 0) {
    if (failure !== null) throw failure;
    if (performance.now() > deadline) throw new Error(`the worker did not park within ${DEADLINE_MS} ms`);
    await new Promise((r) => setTimeout(r, 1));
  }
  return {
    startedAt: times[0] as number,
    parkedAt: times[1] as number,
    release: () => {
      Atomics.store(flags, 1, 1);
      Atomics.notify(flags, 1);
      return reply;
    },
  };
}

/** The ctrl word of every slot of `limiter`'s table. */
function ctrlWords(limiter: RateLimiter): number[] {
  const w = new Int32Array(limiter.handle.table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const out: number[] = [];
  for (let slot = 0; slot < limiter.stats().capacity; slot++) out.push(Atomics.load(w, HEADER_WORDS + slot * slotWords + S_CTRL));
  return out;
}

/** Indices of the slots whose ctrl word is in `state`. */
function slotsIn(limiter: RateLimiter, state: number): number[] {
  return ctrlWords(limiter).flatMap((c, slot) => ((c & 3) === state ? [slot] : []));
}

function admittedOf(limiter: RateLimiter, key: string, tries: number): number {
  let n = 0;
  for (let i = 0; i < tries; i++) if (limiter.allow(key)) n++;
  return n;
}

describe('an inserter stalled between its re-scan and its publish', () => {
  it('cannot give a key a second live copy when another thread inserts it past claimTimeoutMs', async () => {
    const claimTimeoutMs = 5;
    const limiter = new RateLimiter({ limit: LIMIT, maxKeys: 8, claimTimeoutMs, clock: new ManualClock(1_000_000) });
    const a = await parkedInsert(limiter.handle, 'k', 20);
    // A holds its claim on 'k' and is parked inside initSlot: nothing is published yet.
    expect(limiter.stats()).toMatchObject({ liveKeys: 0, claimed: 1 });
    // Precondition: A's claim is older than claimTimeoutMs (by whole-ms stamps).
    waitUntil(a.parkedAt + claimTimeoutMs + 2);
    const admittedHere = admittedOf(limiter, 'k', 20);
    // The contention really happened: this thread inserted 'k' while A's claim was still there
    // (held, not taken over as a dead inserter's slot, which happens only after 30x the timeout).
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, claimed: 1 });
    expect(admittedHere).toBe(10);
    const { admitted: admittedInA, clockCalls } = await a.release();
    expect(clockCalls).toBeGreaterThan(1); // A went on past its park and decided
    // One copy of 'k', one burst in all.
    expect({ admitted: admittedHere + admittedInA, liveKeys: limiter.stats().liveKeys }).toEqual({ admitted: 10, liveKeys: 1 });
    expect(limiter.stats().claimed).toBe(1); // A's cancelled claim, held until 30x the timeout
  });

  it('cannot either when the other thread inserts the key earlier in the chain than the stalled claim', async () => {
    const claimTimeoutMs = 20;
    // The sweep below must come while A's claim is younger than claimTimeoutMs (an older one it
    // cancels, and the freed head is then cleared to EMPTY). Found in CI at 5 ms on a busy machine:
    // a late sweep left no tombstone. A late attempt is run again, up to 10 times.
    let setup: { limiter: RateLimiter; fillerSlot: number | undefined; claimSlot: number | undefined; a: Parked } | undefined;
    for (let attempt = 0; attempt < 10 && setup === undefined; attempt++) {
      const clock = new ManualClock(1_000_000);
      // Every key hashes alike: one probe chain.
      const limiter = new RateLimiter({ limit: LIMIT, maxKeys: 8, claimTimeoutMs, clock, forceHash: 7 });
      expect(limiter.tryAcquire('filler', 0).allowed).toBe(true); // a fresh key at the chain's head
      const [fillerSlot] = slotsIn(limiter, LIVE);
      const a = await parkedInsert(limiter.handle, 'k', 20);
      const [claimSlot] = slotsIn(limiter, BUSY);
      // One ms later 'filler' is idle: sweep() frees the chain's head, before A's claim.
      clock.advance(1);
      expect(limiter.sweep()).toBe(1);
      // The claim's stamp is no earlier than startedAt's whole ms: younger than this, it was not cancelled.
      if (performance.now() - a.startedAt < claimTimeoutMs) setup = { limiter, fillerSlot, claimSlot, a };
      else await a.release();
    }
    if (setup === undefined) throw new Error('no sweep came within claimTimeoutMs of the parked claim in 10 attempts');
    const { limiter, fillerSlot, claimSlot, a } = setup;
    expect(limiter.stats()).toMatchObject({ liveKeys: 0, claimed: 1, tombstones: 1 });
    waitUntil(a.parkedAt + claimTimeoutMs + 2); // precondition: A's claim is past claimTimeoutMs
    const admittedHere = admittedOf(limiter, 'k', 20);
    // This thread's copy took the freed head, ahead of A's claim, which it met later in its re-scan.
    expect(slotsIn(limiter, LIVE)).toEqual([fillerSlot]);
    expect(slotsIn(limiter, BUSY)).toEqual([claimSlot]);
    expect(admittedHere).toBe(10);
    const { admitted: admittedInA } = await a.release();
    expect({ admitted: admittedHere + admittedInA, liveKeys: limiter.stats().liveKeys }).toEqual({ admitted: 10, liveKeys: 1 });
  });

  it('leaves its cancelled slot unused until reuseAfterMs (here 30x claimTimeoutMs), then sweep() reclaims it', async () => {
    // 30x 100 ms: the steps below, a worker's release and reply among them, run well inside 3 s
    // on a busy machine (at 30 ms, 900 ms).
    const claimTimeoutMs = 100;
    const reuseAfterMs = REUSE_AFTER_TIMEOUTS * claimTimeoutMs;
    // Every key hashes alike: one probe chain, so every new key passes the cancelled slot.
    const limiter = new RateLimiter({ limit: LIMIT, maxKeys: 8, ...stagedReuse(claimTimeoutMs), clock: new ManualClock(1_000_000), forceHash: 7 });
    const a = await parkedInsert(limiter.handle, 'k', 10);
    const before = ctrlWords(limiter);
    expect(before.filter((c) => c !== 0)).toHaveLength(1); // only A's claim in the table
    const claimSlot = before.findIndex((c) => (c & 3) === BUSY);
    const claimWord = before[claimSlot] as number;

    waitUntil(a.parkedAt + claimTimeoutMs + 2); // precondition: A's claim is past claimTimeoutMs
    expect(limiter.tryAcquire('k', 10)).toMatchObject({ allowed: true, remaining: 0 });
    // A's claim is cancelled: a different word (A's publish and abandon, compareExchanges from its
    // claim word, now fail), still BUSY (not free, not live), and the key lives in another slot.
    const cancelled = ctrlWords(limiter)[claimSlot] as number;
    expect(cancelled).not.toBe(claimWord);
    expect(cancelled & 3).toBe(BUSY);
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, claimed: 1 });

    // A resumes: it writes its initial state into the cancelled slot, fails to publish, and finds
    // the surviving copy, which is spent.
    expect((await a.release()).admitted).toBe(0);
    expect(ctrlWords(limiter)[claimSlot]).toBe(cancelled);

    // Before 30x the timeout: a new key in the same chain neither reuses the cancelled slot nor
    // cancels it again; sweep() leaves it alone.
    expect(limiter.tryAcquire('other', 10)).toMatchObject({ allowed: true, remaining: 0 });
    expect(ctrlWords(limiter)[claimSlot]).toBe(cancelled);
    expect(limiter.sweep()).toBe(0);
    expect(limiter.stats()).toMatchObject({ liveKeys: 2, claimed: 1, tombstones: 0 });
    // Precondition of the lines above: they ran while A's claim was younger than 30x the timeout.
    expect(performance.now() - a.startedAt).toBeLessThan(reuseAfterMs);

    // After 30x the timeout: sweep() reclaims it, and the next new key takes it.
    waitUntil(a.parkedAt + reuseAfterMs + 2);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.stats()).toMatchObject({ liveKeys: 2, claimed: 0, tombstones: 1 });
    expect(limiter.tryAcquire('after', 10)).toMatchObject({ allowed: true, remaining: 0 });
    expect((ctrlWords(limiter)[claimSlot] as number) & 3).toBe(LIVE);
    expect(limiter.stats()).toMatchObject({ liveKeys: 3, claimed: 0, tombstones: 0 });
    // Every key kept exactly its own burst.
    for (const key of ['k', 'other', 'after']) expect(limiter.tryAcquire(key, 0).remaining).toBe(0);
  });
});

describe('an inserter stalled past 30x claimTimeoutMs', () => {
  // Found: a PolicyLimiter kill storm (claimTimeoutMs 1, on a loaded 2-core host) admitted a
  // pair 2 past its bound. A claim was taken over as a dead inserter's once 30x claimTimeoutMs
  // old (30 ms here), and the stalled inserter, resuming, wrote its fresh state over the key
  // that had taken its slot: that key admitted a second burst. The table now waits 30 s at
  // least (REUSE_FLOOR_MS), whatever claimTimeoutMs.
  it('does not lose its slot to another key, so its fresh state lands on no other key', async () => {
    const claimTimeoutMs = 1;
    const limiter = new RateLimiter({ limit: LIMIT, maxKeys: 8, claimTimeoutMs, clock: new ManualClock(1_000_000), forceHash: 7 });
    const a = await parkedInsert(limiter.handle, 'k', 10);
    const [claimSlot] = slotsIn(limiter, BUSY);
    waitUntil(a.parkedAt + REUSE_AFTER_TIMEOUTS * claimTimeoutMs + 5); // precondition: A stalled past 30x the timeout
    // 'x' hashes alike and comes while A is parked: it takes another slot, and its burst.
    expect(admittedOf(limiter, 'x', 20)).toBe(10);
    expect(slotsIn(limiter, BUSY)).toEqual([claimSlot]);
    expect(limiter.sweep()).toBe(0); // nor does a sweep take the claim
    // A resumes: its state goes to its own slot, its publish fails, and it inserts 'k' anew.
    expect((await a.release()).admitted).toBe(10);
    expect(admittedOf(limiter, 'x', 20)).toBe(0);
    expect(admittedOf(limiter, 'k', 20)).toBe(0);
    expect(limiter.stats()).toMatchObject({ liveKeys: 2 });
  });

  it('reuses the slot of a claim older than reuseAfterMs (here shortened to 30 ms): a dead inserter costs its slot until then', async () => {
    const claimTimeoutMs = 1;
    // HASHED: there the next key of the chain takes the expired claim's slot (a SLAB table's next
    // key takes its thread's next free slot).
    const limiter = new RateLimiter({ limit: LIMIT, maxKeys: 8, ...stagedReuse(claimTimeoutMs), clock: new ManualClock(1_000_000), forceHash: 7, ...HASHED_LAYOUT });
    const a = await parkedInsert(limiter.handle, 'k', 10);
    const [claimSlot] = slotsIn(limiter, BUSY);
    await workers.splice(0)[0]?.terminate(); // A dies holding its claim
    waitUntil(a.parkedAt + REUSE_AFTER_TIMEOUTS * claimTimeoutMs + 5);
    expect(admittedOf(limiter, 'x', 20)).toBe(10);
    expect(slotsIn(limiter, LIVE)).toEqual([claimSlot]); // 'x' took the dead claim's slot
    expect(slotsIn(limiter, BUSY)).toEqual([]);
  });
});
