// The local tier's refusal memo (TierRef): a thread that read a key's refusal answers the key's
// next checks from its own copy until the refusal ends, loading only clearAt. Several instances
// on one thread stand for threads (each has its own memo). What must hold: "refused or not" is
// exactly what the shared words say, a clear() by any thread ends every memo at once, and a raise
// by another thread is seen no later than when the memo runs out.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/time/clock.js';
import { LocalTier } from '../../src/redis/local-tier.js';
import { ANSWER_WINDOW_MS } from '../../src/redis/local-tier-slot.js';
import { loadsDuring } from '../helpers/atomics-spy.js';

function threeAt(ms: number, options: { maxKeys?: number; forceHash?: number } = {}) {
  const clock = new ManualClock(ms);
  const a = LocalTier.create({ clock, maxKeys: 16, ...options });
  return { clock, a, b: LocalTier.attach(a.handle), c: LocalTier.attach(a.handle) };
}

describe('the local tier remembers the refusals it read', () => {
  it('answers a refusal it read before with the two loads of clearAt, not the slot\'s five', () => {
    const { a, b } = threeAt(1_000);
    a.refuseUntil('k', 1_500);
    let first = 0;
    expect(loadsDuring(() => (first = b.refusedFor('k', 1_000)))).toBeGreaterThan(5); // b finds k's slot first
    expect(first).toBe(500);
    let again = 0;
    expect(loadsDuring(() => (again = b.refusedFor('k', 1_200)))).toBe(2);
    expect(again).toBe(300);
    // Once over, the word is read again (and says the same: over).
    expect(loadsDuring(() => expect(b.refusedFor('k', 1_500)).toBe(0))).toBe(5);
  });

  it('a clear() by another thread ends the memo at once', () => {
    const { clock, a, b } = threeAt(1_000);
    a.refuseUntil('k', 1_500);
    expect(b.refusedFor('k')).toBe(500); // b's memo: (1,000, 1,500)
    clock.set(1_100);
    a.clear();
    expect(b.refusedFor('k')).toBe(0);
    expect(b.refusedFor('k', 1_050)).toBe(0); // any reading: the answer was asked before the clear
    // An answer asked after the clear counts, and is remembered in turn.
    clock.set(1_101);
    expect(a.refuseUntil('k', 1_300)).toBe(true);
    expect(b.refusedFor('k')).toBe(199);
    clock.set(1_102);
    a.clear();
    expect(b.refusedFor('k')).toBe(0);
  });

  it('sees its own raise at once, another thread\'s once its memo runs out', () => {
    const { clock, a, b } = threeAt(1_000);
    a.refuseUntil('k', 1_200);
    expect(b.refusedFor('k')).toBe(200);
    expect(a.refusedFor('k')).toBe(200);
    clock.set(1_100);
    expect(a.refuseUntil('k', 2_000)).toBe(true); // a later answer: raised
    expect(a.refusedFor('k')).toBe(900); // a's own raise
    expect(b.refusedFor('k')).toBe(100); // b's memo: refused, for the shorter time it read
    clock.set(1_200);
    expect(b.refusedFor('k')).toBe(800); // its memo over: the word, raised
  });

  it('never refuses at or after the end it read, through a reclaim and a reuse of the slot', () => {
    // One forced hash: every key probes the same slots, so the next key takes k's slot.
    const { clock, a, b } = threeAt(1_000, { forceHash: 3, maxKeys: 4 });
    a.refuseUntil('k', 1_050);
    expect(b.refusedFor('k')).toBe(50);
    clock.set(1_050 + ANSWER_WINDOW_MS + 1);
    expect(a.sweep()).toBe(1); // k reclaimed
    expect(a.refuseUntil('j', clock.now() + 100)).toBe(true); // j in k's slot
    expect(b.refusedFor('k')).toBe(0);
    expect(b.refusedFor('k', 1_049)).toBe(0); // even at a reading inside k's old refusal: k is gone
    expect(b.refusedFor('j')).toBe(100);
  });

  it('matches the shared words over random refusals, raises, clears, sweeps and readings by three threads (seeded)', () => {
    const { clock, a, b, c } = threeAt(5_000, { maxKeys: 64 });
    const tiers = [a, b, c];
    const keys = ['p', 'q', 'r', 's'];
    interface Entry { asked: number; until: number; inserted: number }
    const model = new Map<string, Entry>();
    let clearAt = 0;
    const seen = { exact: 0, shorter: 0, refused: 0, free: 0, clears: 0 };
    let s = 987654;
    const rand = (n: number) => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return (s >>> 8) % n; };
    for (let step = 0; step < 6_000; step++) {
      const key = keys[rand(keys.length)] as string;
      const tier = tiers[rand(3)] as LocalTier;
      const now = clock.now();
      const op = rand(12);
      if (op < 5) {
        const a0 = now - rand(20);
        const until = now + rand(300) - 30;
        let e = model.get(key);
        if (e === undefined) model.set(key, (e = { asked: now - ANSWER_WINDOW_MS, until: now - ANSWER_WINDOW_MS, inserted: now }));
        const asked = Math.floor(a0);
        const u = Math.floor(until);
        if (asked >= clearAt && u > now && !(e.asked >= clearAt && e.until >= u) && (e.asked < clearAt || asked >= e.asked)) {
          Object.assign(e, { asked, until: u });
        }
        tier.refuseUntil(key, until, a0);
      } else if (op < 9) {
        clock.advance(rand(5) === 0 ? ANSWER_WINDOW_MS : rand(60));
      } else if (op === 9) {
        tier.clear();
        clearAt = Math.floor(now) + 1;
        seen.clears++;
      } else {
        const swept = tier.sweep();
        let freed = 0;
        for (const [k, e] of model) if (e.until + ANSWER_WINDOW_MS < now && e.inserted < now) { model.delete(k); freed++; }
        expect(swept).toBe(freed);
      }
      const reading = clock.now() + rand(40) - 20;
      for (const t of tiers) {
        for (const k of keys) {
          const e = model.get(k);
          const left = e !== undefined && e.asked >= clearAt ? Math.max(0, e.until - reading) : 0;
          const got = t.refusedFor(k, reading);
          if (left === 0) {
            expect(got, `step ${step}: ${k} not refused`).toBe(0);
            seen.free++;
          } else {
            // Refused, for at most what the words say (a memo may hold a refusal since raised).
            expect(got, `step ${step}: ${k} refused`).toBeGreaterThan(0);
            expect(got).toBeLessThanOrEqual(left);
            seen.refused++;
            if (got === left) seen.exact++;
            else seen.shorter++;
          }
        }
      }
    }
    for (const n of Object.values(seen)) expect(n).toBeGreaterThan(20);
  });
});
