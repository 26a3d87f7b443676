import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter, type Limit } from '../../src/index.js';
import { markedTryAcquire, spendGiveBack } from '../../src/rate/rate-limiter.js';
import { replayGcra, type Admission } from '../helpers/model.js';

// A reservation acts when the last of its limits allows, and the key's limits count it there.
// Found: a GCRA limit counted a reservation at the reading it was made at, whatever made it wait
// longer (another of the key's limits, or the global cap): under a cap that held the request
// 500 ms, two reservations of one key acted 10 ms apart where the key allows one per 100 ms. Both
// widths. Found too, and not fixed: a reservation the key's limit delays is counted by a GCRA cap
// at its own wait, so another key can act beside it (the cap's one TAT cannot hold a later slot
// without refusing every key until then; docs/testing.md, "Found, not yet fixed"): `it.fails`.

const T0 = 1_000_000;
const DAY = 86_400_000;
const KEY = { permits: 10, periodMs: 1_000, burst: 1 }; // one per 100 ms, per key
const CAP = { permits: 100, periodMs: 1_000, burst: 1 }; // one per 10 ms, across keys
const act = (t: number, reserved = false): Admission => ({ t, first: t, cost: 1, key: 0, ...(reserved ? { reserved: true } : {}) });
const violations = (acts: Admission[], limit: typeof KEY): number => replayGcra([...acts].sort((a, b) => a.t - b.t), limit, 0).violations;
const WIDTHS = [['width 32', {}], ['width 64', { maxBlockMs: 30 * DAY }]] as const;
const make = (clock: ManualClock, extra: object, limit: Limit | Limit[] = KEY, globalLimit: Limit | null = CAP): RateLimiter =>
  new RateLimiter({ limit, ...(globalLimit === null ? {} : { globalLimit }), maxKeys: 128, clock, ...extra });

describe.each(WIDTHS)('GCRA reservations count where they act (%s)', (_w, extra) => {
  it('found: the cap delays two reservations of one key: the key limit spaces them', () => {
    const clock = new ManualClock(T0);
    const l = make(clock, extra);
    for (let i = 0; i < 50; i++) l.reserve(`o${i}`); // other keys hold the cap for 500 ms
    const r1 = l.reserve('k');
    const r2 = l.reserve('k');
    expect(r1.actAtMs - T0).toBe(500);
    expect(r2.actAtMs - r1.actAtMs).toBeGreaterThanOrEqual(100);
    expect(violations([act(r1.actAtMs, true), act(r2.actAtMs, true)], KEY)).toBe(0);
  });

  it.fails('found, not fixed: the key limit delays a reservation: the cap counts it where it acts', () => {
    const clock = new ManualClock(T0);
    const l = make(clock, extra);
    expect(l.allow('k')).toBe(true);
    const r = l.reserve('k'); // the key limit: acts at +100
    expect(r.actAtMs - T0).toBe(100);
    clock.set(r.actAtMs);
    const acts = [act(T0), act(r.actAtMs, true)];
    if (l.allow('x')) acts.push(act(r.actAtMs));
    expect(violations(acts, CAP)).toBe(0);
  });

  it.fails('found, not fixed: the same through a block', () => {
    const clock = new ManualClock(T0);
    const l = make(clock, extra, { permits: 1_000, periodMs: 1_000, burst: 1_000 });
    l.block('k', 500);
    const r = l.reserve('k');
    expect(r.actAtMs - T0).toBeGreaterThanOrEqual(500);
    clock.set(r.actAtMs);
    const acts = [act(r.actAtMs, true)];
    if (l.allow('x')) acts.push(act(r.actAtMs));
    expect(violations(acts, CAP)).toBe(0);
  });

  it('two limits on one key: the one that did not set the wait counts the request where it acts', () => {
    const clock = new ManualClock(T0);
    const slow = { permits: 1, periodMs: 1_000, burst: 1 };
    const fast = { permits: 10, periodMs: 1_000, burst: 2 };
    const l = make(clock, extra, [fast, slow], null);
    const acts: Admission[] = [];
    for (let i = 0; i < 4; i++) acts.push(act(l.reserve('k').actAtMs, true));
    for (let t = T0; t <= T0 + 4_000; t += 50) {
      clock.set(t);
      while (l.allow('k')) acts.push(act(t));
    }
    expect(violations(acts, fast)).toBe(0);
    expect(violations(acts, slow)).toBe(0);
  });

  it('a cancel of a reservation the cap delayed gives nothing back to a limit a later one was placed on', () => {
    const clock = new ManualClock(T0);
    const l = make(clock, extra, { permits: 10, periodMs: 1_000, burst: 2 });
    for (let i = 0; i < 50; i++) l.reserve(`o${i}`);
    const r1 = l.reserve('k');
    const r2 = l.reserve('k');
    clock.advance(10);
    r1.cancel();
    const acts = [act(r2.actAtMs, true)];
    for (let t = T0 + 10; t <= r2.actAtMs + 200; t += 10) {
      clock.set(t);
      while (l.allow('k')) acts.push(act(t));
    }
    expect(violations(acts, { permits: 10, periodMs: 1_000, burst: 2 })).toBe(0);
  });

  it("a spend's give-back made before a reservation that was placed past the key's debt gives nothing", () => {
    const clock = new ManualClock(T0);
    const key = { permits: 10, periodMs: 1_000, burst: 2 };
    const l = make(clock, extra, key);
    expect(markedTryAcquire(l, 'k', 1).allowed).toBe(true);
    const back = spendGiveBack(l, 'k', 1);
    for (let i = 0; i < 50; i++) l.reserve(`o${i}`); // the cap held for 500 ms
    const r = l.reserve('k'); // acts at +500, placed there on the key limit
    back();
    const acts = [act(r.actAtMs, true)];
    for (let t = T0; t <= r.actAtMs + 300; t += 10) {
      clock.set(t);
      while (l.allow('k')) acts.push(act(t));
    }
    expect(violations(acts, key)).toBe(0);
  });
});

describe('a place further ahead than a limit holds', () => {
  it('is refused at once, nothing counted, and a later try can pass (as a window\'s past its next window)', async () => {
    // 2 a second and 5 a minute: the sixth place is 12 s ahead, which the per-second limit's
    // 32-bit state cannot count ahead once it counts the request where it acts.
    const clock = new ManualClock(T0);
    const l = new RateLimiter({ limit: [{ permits: 2, periodMs: 1_000 }, { permits: 5, periodMs: 60_000 }], maxKeys: 8, clock });
    for (let i = 0; i < 5; i++) l.reserve('k');
    expect(() => l.reserve('k', { maxWaitMs: 60_000 })).toThrow(/further ahead than its limits can hold/);
    await expect(l.acquire('k', { maxWaitMs: 60_000 })).rejects.toThrow(/further ahead than its limits can hold/);
    clock.advance(4_000);
    expect(l.reserve('k', { maxWaitMs: 60_000 }).actAtMs).toBe(T0 + 12_000);
  });
});

describe('a GCRA cap of either width is never placed at a key\'s act', () => {
  // Found by an attack: a cap that compiles to 64-bit states (perSecond(300): no 32-bit tick
  // holds its interval within bounds) was placed at the act of a reservation its key held back a
  // minute, and every other key was refused for that minute (0 of 50), a cancel not reopening it.
  it.each([['perSecond(300): 64-bit states', 300], ['perSecond(200): 32-bit', 200]])('%s', (_name, permits) => {
    const clock = new ManualClock(T0);
    const l = new RateLimiter({ limit: { permits: 1, periodMs: 60_000 }, globalLimit: { permits, periodMs: 1_000 }, maxKeys: 64, clock });
    expect(l.allow('k')).toBe(true);
    const r = l.reserve('k');
    expect(r.delayMs).toBe(60_000); // held back by k's own limit
    clock.advance(10);
    let passed = 0;
    for (let i = 0; i < 50; i++) if (l.allow(`x${i}`)) passed++;
    expect(passed).toBe(50);
  });
});
