// The local tier on one thread, on a ManualClock: exact refusal and lease behaviour, clocks far
// past 32-bit wrap-arounds, clear(), key separation, a full table, and argument checks. Worker
// threads, stalls and terminations: local-tier-threads.test.ts.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/time/clock.js';
import { perSecond } from '../../src/config/limit.js';
import { RateLimiter } from '../../src/rate/rate-limiter.js';
import { LocalTier, type LocalTierOptions } from '../../src/redis/local-tier.js';
import { ANSWER_WINDOW_MS, LIMIT_MS, MAX_PERMITS, MAX_REFUSAL_MS } from '../../src/redis/local-tier-slot.js';
import { loadsDuring } from '../helpers/atomics-spy.js';
import { leaseOf, liveSlots } from '../helpers/local-tier.js';

const WRAP = 2 ** 32;

function tierAt(ms: number, options: Omit<LocalTierOptions, 'clock'> = {}) {
  const clock = new ManualClock(ms);
  return { clock, tier: LocalTier.create({ clock, ...options }) };
}

describe('refusal cache', () => {
  it('refuses until the time given, and never at or after it', () => {
    const { tier } = tierAt(1_000);
    expect(tier.refusedFor('k', 1_000)).toBe(0);
    expect(tier.refuseUntil('k', 1_500.7)).toBe(true); // kept as 1,500: never past the answer
    expect(tier.refusedFor('k', 1_000)).toBe(500);
    expect(tier.refusedFor('k', 1_499.5)).toBe(0.5);
    expect(tier.refusedFor('k', 1_500)).toBe(0);
    expect(tier.refusedFor('k', 1_500.1)).toBe(0);
    expect(tier.refusedFor('k', 9e15)).toBe(0);
    expect(tier.refusedFor('other', 1_000)).toBe(0);
    expect(tier.refusedFor('k')).toBe(500); // default: the tier's clock
    expect(tier.refuseUntil('gone', 1_000)).toBe(false); // already over: nothing recorded
  });

  it('a key stored without a refusal is never refused, even at a reading before its slot began', () => {
    // A lease's refill stores the key with no refusal. A reading earlier than the slot's stamp
    // (a clock that started below 0, or a reading taken before the insert) must not turn the
    // empty refusal into one: found by a client whose clock ran an hour behind.
    const { tier } = tierAt(100_000);
    expect(tier.beginRefill('k')).toBe(true);
    expect(tier.refusedFor('k', 100_000)).toBe(0);
    expect(tier.refusedFor('k', 50_000)).toBe(0);
    expect(tier.refusedFor('k', -3_600_000)).toBe(0);
    expect(tier.allRefusedFor(-3_600_000)).toBe(0);
  });

  it('raises, never lowers; ignores answers asked before the recorded one; keeps at most MAX_REFUSAL_MS', () => {
    const { clock, tier } = tierAt(1_000);
    expect(tier.refuseUntil('k', 1_400)).toBe(true);
    expect(tier.refuseUntil('k', 1_300)).toBe(true); // held: already refused longer
    expect(tier.refusedFor('k', 1_000)).toBe(400);
    expect(tier.refuseUntil('k', 1_600)).toBe(true);
    expect(tier.refusedFor('k', 1_000)).toBe(600);
    clock.set(1_010);
    expect(tier.refuseUntil('k', 1_700, 1_010)).toBe(true);
    expect(tier.refuseUntil('k', 1_900, 1_005)).toBe(false); // asked before the recorded answer
    expect(tier.refusedFor('k', 1_010)).toBe(690);
    expect(tier.refuseUntil('k', 1_100_000, 1_010)).toBe(true);
    expect(tier.refusedFor('k', 1_010)).toBe(MAX_REFUSAL_MS); // cut at 17.5 minutes from askedAt
    expect(tier.refuseUntil('j', 2_000, 5_000)).toBe(true); // an askedAt in the future counts as now
    expect(tier.refusedFor('j', 1_010)).toBe(990);
  });

  it('records answers asked before the key was first stored, within ANSWER_WINDOW_MS', () => {
    const { tier } = tierAt(50_000);
    expect(tier.refuseUntil('k', 50_500, 49_900)).toBe(true);
    expect(tier.refusedFor('k', 50_000)).toBe(500);
    expect(tier.refuseUntil('old', 50_500, 50_000 - ANSWER_WINDOW_MS - 1)).toBe(false);
    expect(tier.refusedFor('old', 50_000)).toBe(0);
  });

  it('never reports an entry refused after its time, however far the clock moved (32-bit wraps and more)', () => {
    const { clock, tier } = tierAt(0);
    expect(tier.refuseUntil('zero', 1_000)).toBe(true); // written at ms 0
    expect(tier.refusedFor('zero', 999)).toBe(1);
    for (const k of [1, 2, 3, 4, 1024]) {
      for (const d of [0, 0.5, 1, 500, 999, 999.5, 1_000, 1_001, -1, -1_000]) expect(tier.refusedFor('zero', k * WRAP + d)).toBe(0);
    }
    for (const at of [2 ** 31, 2 ** 31 + 1_000, 2 ** 43, LIMIT_MS, 2 ** 44, 2 ** 53]) expect(tier.refusedFor('zero', at)).toBe(0);
    // Written just before a 2^32 ms boundary, ending just after it.
    clock.set(WRAP - 100);
    expect(tier.refuseUntil('across', WRAP + 100)).toBe(true);
    expect(tier.refusedFor('across', WRAP - 50)).toBe(150);
    expect(tier.refusedFor('across', WRAP + 50)).toBe(50);
    expect(tier.refusedFor('across', WRAP + 100)).toBe(0);
    expect(tier.refusedFor('across', 2 * WRAP + 50)).toBe(0);
    expect(tier.refusedFor('zero', WRAP)).toBe(0); // the untouched entry, read again
    // A stamp whose low 12 bits carry (4095 to 4096 ms in a 4096 ms block), and one whose high
    // word has its sign bit set (2^43 ms and up).
    for (const base of [4 * WRAP + 4_095, 2 ** 43 + 4_090]) {
      clock.set(base);
      expect(tier.refuseUntil(`s${base}`, base + 10)).toBe(true);
      expect(tier.refusedFor(`s${base}`, base)).toBe(10);
      expect(tier.refusedFor(`s${base}`, base + 1)).toBe(9);
      expect(tier.refusedFor(`s${base}`, base + 10)).toBe(0);
      expect(tier.refusedFor(`s${base}`, base + WRAP + 1)).toBe(0);
    }
    // At and above LIMIT_MS (557 years on the clock) nothing is stored, and nothing reads refused.
    clock.set(LIMIT_MS);
    expect(tier.refuseUntil('late', LIMIT_MS + 100)).toBe(false);
    expect(tier.offer('late', 5, LIMIT_MS)).toBe(false);
    expect(tier.offer('late', 5, LIMIT_MS - 10)).toBe(false); // a storable askedAt, but the clock is past
    expect(tier.refusedFor('late', LIMIT_MS)).toBe(0);
    expect(tier.refusedFor('zero', LIMIT_MS)).toBe(0);
  });

  it('the all-keys refusal: the same rules, one entry for the process', () => {
    const { clock, tier } = tierAt(0);
    expect(tier.allRefusedFor(0)).toBe(0);
    expect(tier.refuseAllUntil(250)).toBe(true);
    expect(tier.refuseAllUntil(200)).toBe(true);
    expect(tier.allRefusedFor(0)).toBe(250);
    expect(tier.allRefusedFor(249.5)).toBe(0.5);
    expect(tier.allRefusedFor(250)).toBe(0);
    for (const k of [1, 2, 3]) expect(tier.allRefusedFor(k * WRAP + 100)).toBe(0);
    expect(tier.refusedFor('k', 0)).toBe(0); // keys are separate
    clock.set(100);
    tier.clear();
    expect(tier.allRefusedFor(100)).toBe(0);
  });

  it('clear() forgets every refusal and lease at once; answers asked before it are ignored', () => {
    const { clock, tier } = tierAt(1_000, { leaseMs: 500 });
    tier.refuseUntil('k', 2_000);
    tier.refuseAllUntil(2_000);
    expect(tier.offer('l', 5, 1_000)).toBe(true);
    expect(tier.take('l')).toBe(true);
    tier.clear();
    expect(tier.refusedFor('k', 1_000)).toBe(0);
    expect(tier.allRefusedFor(1_000)).toBe(0);
    expect(tier.take('l')).toBe(false);
    // Answers asked in the clear's ms, or before it, do not count.
    expect(tier.refuseUntil('k', 1_500)).toBe(false);
    expect(tier.offer('l', 5, 1_000)).toBe(false);
    clock.set(1_001);
    expect(tier.refuseUntil('k', 3_000, 999)).toBe(false);
    expect(tier.offer('l', 5, 999)).toBe(false);
    // New answers count, even shorter ones than before the clear.
    expect(tier.refuseUntil('k', 1_500)).toBe(true);
    expect(tier.refusedFor('k', 1_001)).toBe(499);
    expect(tier.offer('l', 2, 1_001)).toBe(true);
    expect([tier.take('l'), tier.take('l'), tier.take('l')]).toEqual([true, true, false]);
    tier.clear();
    tier.clear(); // twice in one ms: the same
    expect(tier.refusedFor('k', 1_001)).toBe(0);
  });

  it('never confuses two keys: colliding hashes, prefixes, and a reclaimed slot reused', () => {
    const { clock, tier } = tierAt(1_000, { maxKeys: 32, forceHash: 77 }); // every key collides
    const keys = [...Array.from({ length: 30 }, (_, i) => `key-${i}`), 'a', 'a\u0000', 'ab', 'b'];
    keys.forEach((k, i) => expect(tier.refuseUntil(k, 1_001 + i)).toBe(true));
    keys.forEach((k, i) => expect(tier.refusedFor(k, 1_000)).toBe(1 + i));
    expect(tier.refusedFor('key-30', 1_000)).toBe(0);
    expect(new Set(liveSlots(tier).map((s) => s.key)).size).toBe(keys.length);
    // Every entry idle: reclaimed; new keys get slots of old ones and start unrefused.
    clock.set(1_100 + ANSWER_WINDOW_MS);
    expect(tier.sweep()).toBe(keys.length);
    const other = LocalTier.attach(tier.handle); // its cache still points at the old slots
    expect(tier.refuseUntil('new', 1_200 + ANSWER_WINDOW_MS)).toBe(true);
    for (const k of keys) expect(other.refusedFor(k, clock.now())).toBe(0);
    expect(other.refusedFor('new', clock.now())).toBe(100);
  });

  it('a full table just does not cache; sweep and full stripes free idle entries', () => {
    const { clock, tier } = tierAt(1_000, { maxKeys: 2, forceHash: 5 }); // one stripe of 4 slots
    for (const k of ['a', 'b', 'c', 'd']) expect(tier.refuseUntil(k, 2_000)).toBe(true);
    expect(tier.refuseUntil('e', 2_000)).toBe(false);
    expect(tier.offer('e', 5, 1_000)).toBe(false);
    expect(tier.beginRefill('e')).toBe(false);
    expect(tier.refusedFor('e', 1_000)).toBe(0);
    expect(tier.sweep()).toBe(0); // nothing idle
    clock.set(2_001 + ANSWER_WINDOW_MS);
    expect(tier.refuseUntil('e', 20_000)).toBe(true); // the insert reclaims the idle stripe
    expect(tier.refusedFor('e', clock.now())).toBe(20_000 - clock.now());
    expect(tier.stats()).toMatchObject({ liveKeys: 1, capacity: 4, maxKeys: 2 });
  });

  it('a stripe found full is not scanned again by this thread until the tier\'s clock moves 50 ms', () => {
    // Found: with a full tier, every refusal recorded scanned the full stripe (reclaim and
    // compaction, every slot), and a Redis limiter in front of it ran 10x slower.
    const { clock, tier } = tierAt(1_000, { maxKeys: 800, forceHash: 5 }); // every key in one stripe of 1,024 slots
    let held = 0;
    for (let i = 0; tier.refuseUntil(`k${i}`, 60_000); i++) held++;
    expect(held).toBe(1_024);
    const scan = (key: string) => loadsDuring(() => tier.refuseUntil(key, 60_000));
    // Not tried: a load or two (the inserts count), no slot's.
    expect(scan('x1')).toBeLessThan(4); // found full just now (the loop's last try)
    expect(scan('x2')).toBeLessThan(4);
    clock.advance(49);
    expect(scan('x3')).toBeLessThan(4);
    clock.advance(1);
    const loads = scan('x4'); // tried again: a full scan, found full
    expect(loads).toBeGreaterThan(1_024);
    expect(scan('x5')).toBeLessThan(4);
    // Entries that go idle are reclaimed by the next try, as before.
    clock.set(60_000 + 2 * ANSWER_WINDOW_MS);
    expect(tier.refuseUntil('x6', 200_000)).toBe(true);
  });

  it('does not cache keys it cannot store; throws for bad arguments, naming them', () => {
    const { tier } = tierAt(1_000, { maxKeyBytes: 8 });
    for (const k of ['123456789', 'ééééé', 'lone\ud800']) {
      expect(tier.refuseUntil(k, 2_000)).toBe(false);
      expect(tier.refusedFor(k, 1_000)).toBe(0);
      expect(tier.offer(k, 3, 1_000)).toBe(false);
      expect(tier.take(k)).toBe(false);
      expect(tier.beginRefill(k)).toBe(false);
    }
    expect(tier.refuseUntil('12345678', 2_000)).toBe(true);
    expect(() => tier.refusedFor(5 as unknown as string, 1)).toThrow(TypeError);
    expect(() => tier.refuseUntil(null as unknown as string, 1)).toThrow(/key must be a string/);
    expect(() => tier.refusedFor('k', NaN)).toThrow(RangeError);
    expect(() => tier.refusedFor('k', Infinity)).toThrow(/nowMs must be a finite number, got Infinity/);
    expect(() => tier.refusedFor('k', '5' as unknown as number)).toThrow(TypeError);
    expect(() => tier.allRefusedFor(NaN)).toThrow(/nowMs/);
    expect(() => tier.refuseUntil('k', -Infinity)).toThrow(/untilMs/);
    expect(() => tier.refuseUntil('k', 5, NaN)).toThrow(/askedAtMs/);
    expect(() => tier.refuseAllUntil(NaN)).toThrow(/untilMs/);
    expect(() => tier.take('k', 0)).toThrow(/cost must be an integer from 1 to 1048574, got 0/);
    expect(() => tier.take('k', 1.5)).toThrow(RangeError);
    expect(() => tier.take('k', 1, NaN)).toThrow(/nowMs/);
    expect(() => tier.offer('k', 0, 1)).toThrow(/permits/);
    expect(() => tier.offer('k', MAX_PERMITS + 1, 1)).toThrow(RangeError);
    expect(() => tier.offer('k', 1, NaN)).toThrow(/askedAtMs/);
    expect(() => tier.beginRefill('k', Infinity)).toThrow(/nowMs/);
    expect(() => tier.endRefill(3 as unknown as string)).toThrow(TypeError);
    expect(() => LocalTier.create({ maxKeys: 0 })).toThrow(/options.maxKeys/);
    expect(() => LocalTier.create({ leaseMs: 0 })).toThrow(/options.leaseMs/);
    expect(() => LocalTier.create({ refillTimeoutMs: 1.5 })).toThrow(/options.refillTimeoutMs/);
    expect(() => LocalTier.create({ onFull: 'allow' } as LocalTierOptions)).toThrow(/options.onFull is not a LocalTier option/);
    expect(() => LocalTier.attach({} as never)).toThrow(TypeError);
    expect(() => LocalTier.attach(null as never)).toThrow(TypeError);
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4 });
    expect(() => LocalTier.attach(limiter.handle as never)).toThrow(/handle is a "sluice.RateLimiter" handle, not a LocalTier's/);
    expect(() => LocalTier.attach({ ...tier.handle, table: limiter.handle.table })).toThrow(/made by a RateLimiter, not a LocalTier/);
    expect(() => RateLimiter.attach(tier.handle as never)).toThrow(TypeError);
    expect(() => new (LocalTier as unknown as new () => LocalTier)()).toThrow(/LocalTier.create/);
  });

  it('matches a model of the rules over random refusals, clears, sweeps and clock moves (seeded)', () => {
    const { clock, tier } = tierAt(5_000, { maxKeys: 64 });
    const keys = ['a', 'b', 'c', 'd', 'e'];
    interface Entry { asked: number; until: number; inserted: number }
    const model = new Map<string, Entry>();
    let clearAt = 0;
    const seen = { recorded: 0, held: 0, ignored: 0, freed: 0, clears: 0 };
    let s = 12345;
    const rand = (n: number) => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return (s >>> 8) % n; };
    for (let step = 0; step < 4_000; step++) {
      const key = keys[rand(keys.length)] as string;
      const now = clock.now();
      const op = rand(10);
      if (op < 5) {
        const asked = rand(3) === 0 ? undefined : now - rand(30);
        const until = now + rand(200) - 20 + rand(2) / 2;
        let e = model.get(key);
        if (e === undefined) model.set(key, (e = { asked: now - ANSWER_WINDOW_MS, until: now - ANSWER_WINDOW_MS, inserted: now }));
        const a = Math.floor(Math.min(asked ?? now, now));
        const u = Math.min(Math.floor(until), a + MAX_REFUSAL_MS);
        let expected = false;
        if (a >= clearAt && u > now) {
          if (e.asked >= clearAt && e.until >= u) {
            expected = true;
            seen.held++;
          } else if (e.asked < clearAt || a >= e.asked) {
            Object.assign(e, { asked: a, until: u });
            expected = true;
            seen.recorded++;
          }
        }
        if (!expected) seen.ignored++;
        expect(tier.refuseUntil(key, until, asked)).toBe(expected);
      } else if (op < 8) {
        clock.advance(rand(4) === 0 ? ANSWER_WINDOW_MS : rand(40));
      } else if (op === 8) {
        if (rand(4) === 0) {
          tier.clear();
          clearAt = Math.floor(now) + 1;
          seen.clears++;
        }
      } else {
        let freed = 0;
        for (const [k, e] of model) if (e.until + ANSWER_WINDOW_MS < now && e.inserted < now) { model.delete(k); freed++; }
        expect(tier.sweep()).toBe(freed);
        seen.freed += freed;
      }
      const reading = clock.now() + rand(50) - 25;
      for (const k of keys) {
        const e = model.get(k);
        expect(tier.refusedFor(k, reading)).toBe(e !== undefined && e.asked >= clearAt ? Math.max(0, e.until - reading) : 0);
      }
    }
    for (const n of Object.values(seen)) expect(n).toBeGreaterThan(20);
  });
});

describe('leases', () => {
  it('take spends exactly the permits offered, until askedAt + leaseMs', () => {
    const { clock, tier } = tierAt(1_000, { leaseMs: 100 });
    expect(tier.take('k')).toBe(false); // no lease
    expect(tier.offer('k', 3, 1_000)).toBe(true);
    expect([tier.take('k', 2), tier.take('k', 2), tier.take('k'), tier.take('k')]).toEqual([true, false, true, false]);
    expect(tier.offer('k', 3, 1_000)).toBe(true);
    expect(tier.take('k', 1, 1_100)).toBe(false); // the caller's reading: expired
    clock.set(1_099.9);
    expect(tier.take('k')).toBe(true);
    clock.set(1_100);
    expect(tier.take('k')).toBe(false);
    expect(leaseOf(tier, 'k')?.field).toBe(2);
    expect(tier.stats().lateSpends).toBe(0);
  });

  it('an offer replaces what is left; expired, pre-clear or older offers are refused', () => {
    const { clock, tier } = tierAt(1_000, { leaseMs: 100 });
    expect(tier.offer('k', 3, 900)).toBe(false); // expired when offered
    expect(tier.offer('k', 3, 1_000)).toBe(true);
    expect(tier.take('k')).toBe(true);
    clock.set(1_050);
    expect(tier.offer('k', 5, 1_020)).toBe(true); // replaces the 2 left
    expect(tier.offer('k', 9, 1_010)).toBe(false); // asked before the lease it would replace
    for (let i = 0; i < 5; i++) expect(tier.take('k')).toBe(true);
    expect(tier.take('k')).toBe(false);
    clock.set(1_119);
    expect(tier.take('k')).toBe(false);
    expect(tier.offer('k', 1, 2_000)).toBe(true); // an askedAt in the future counts as now
    clock.set(1_218);
    expect(tier.take('k')).toBe(true);
  });

  it('a lease offered at ms 0 is long expired at 2^32 ms and after', () => {
    const { clock, tier } = tierAt(0, { leaseMs: 1_000 });
    expect(tier.offer('k', 5, 0)).toBe(true);
    expect(tier.take('k', 1, 999)).toBe(true);
    for (const k of [1, 2, 3]) expect(tier.take('k', 1, k * WRAP + 500)).toBe(false);
    clock.set(WRAP + 10);
    expect(tier.take('k')).toBe(false);
    expect(leaseOf(tier, 'k')?.field).toBe(4);
  });

  it('beginRefill lets one thread refill at a time; another takes over after refillTimeoutMs', () => {
    const { clock, tier } = tierAt(1_000, { refillTimeoutMs: 50 });
    const other = LocalTier.attach(tier.handle);
    expect(tier.endRefill('k')).toBe(false);
    expect(tier.beginRefill('k')).toBe(true);
    expect(tier.beginRefill('k')).toBe(false);
    expect(other.beginRefill('k', 1_049)).toBe(false);
    clock.set(1_050);
    expect(other.beginRefill('k')).toBe(true); // taken over
    expect(tier.endRefill('k')).toBe(false); // not its refill any more
    expect(tier.beginRefill('k')).toBe(false);
    expect(other.endRefill('k')).toBe(true);
    expect(tier.beginRefill('k')).toBe(true);
    expect(tier.endRefill('k')).toBe(true);
  });

  it('sweep keeps keys with a live refusal or lease, and reclaims the rest', () => {
    const { clock, tier } = tierAt(1_000, { leaseMs: 20_000 });
    tier.refuseUntil('refused', 1_000 + 15_000);
    tier.offer('leased', 3, 1_000);
    tier.refuseUntil('brief', 1_010);
    clock.set(1_011 + ANSWER_WINDOW_MS);
    expect(tier.sweep()).toBe(1);
    expect(liveSlots(tier).map((s) => s.key).sort()).toEqual(['leased', 'refused']);
    expect(tier.take('leased')).toBe(true);
    clock.set(21_001 + ANSWER_WINDOW_MS);
    expect(tier.sweep()).toBe(2);
    expect(tier.stats().liveKeys).toBe(0);
    expect(tier.take('leased')).toBe(false);
  });
});
