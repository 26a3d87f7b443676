// Why a free place holds one value (0) in every incarnation of a slot. Free values that differed
// per incarnation (~generation) were tried, to make a stalled stamp fail on the slot's next key,
// and this test broke them: the next key's free value ~(G + 1) is an ordinary stamp in
// incarnation G, so an acquire stalled after its lock check across a reclaim and reinsert
// compareExchanged from an expired stamp equal to it and landed on the new key's free place.
// leaseMs 1 (1 us ticks); at generation 1 the next free value was ~2 = -3.
//   main (now32 -1003): tryAcquire('k') stamps place 0 with -3, never released; expired at -3
//   W (now32 997): tryAcquire('k') locks, reads place 0 = -3 (expired), checks its lock, parked
//   main: past 30x claimTimeoutMs, sweep() takes W's lock over and reclaims 'k'; tryAcquire('k', 0)
//        reinserts it in the same slot
//   W resumes: its compareExchange from -3 must fail on the new key, so it acquires again there.
// Expected: W allowed, and after its release no place held.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { parkAfterCheck } from '../helpers/park-after-check.js';
import { lockIndexOf, slotOf } from '../helpers/slots.js';

describe('a stamp equal to what a next incarnation\'s free value would be', () => {
  // collides: the stamp is -3 = the next free value (fails on HEAD); control: one tick earlier, -4 (passes)
  it.each([['collides', 1003, true], ['control', 1004, false]] as const)('%s: a stalled acquire does not land on the re-inserted key\'s free place', async (_name, back, collides) => {
    const tS = (2 ** 32 - back) / 1000; // ticks mod 2^32 = -back (1 us ticks)
    let t = tS;
    const clock = { now: () => t };
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 1, maxKeys: 8, ...stagedReuse(20), clock });
    const first = limiter.tryAcquire('k');
    expect(first.allowed).toBe(true);
    const before = slotOf(limiter.handle.table, 'k', 1);
    // Precondition: the stamp is an ordinary stamp of this incarnation, equal to the next one's free value.
    expect(before.places[0] === ~((before.ctrl >>> 2) + 1)).toBe(collides);
    t = tS + 2; // the lease expired 1 ms ago
    const w = await parkAfterCheck('lease', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'), t);
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // 'k' again, same slot, next generation
    const after = slotOf(limiter.handle.table, 'k', 1);
    expect(after.ctrl >>> 2).toBe((before.ctrl >>> 2) + 1);
    w.resume();
    const late = await w.next<{ allowed: boolean; reason: string }>();
    w.release();
    const { released } = await w.next<{ released: boolean | null }>();
    await w.worker.terminate();
    expect({ late: late.allowed, released, placesHeld: limiter.stats().placesHeld, again: limiter.tryAcquire('k').allowed })
      .toEqual({ late: true, released: true, placesHeld: 0, again: true });
  });
});
