// A claim is stamped with a clock reading taken before its compareExchange. A thread that stops
// between the two (a stop anywhere must be safe) places a claim already older than the table's
// reuseAfterMs: another thread may take it over the moment it lands, while the first goes on to
// write the slot (found by an attack on 2026-12-05, on both layouts; and, on the SLAB layout, by a
// sweep that stamped the claims it takes to clear freed slots' entries with its first reading).
// A claimer now gives up a claim it finds older than claimTimeoutMs right after placing it
// (insert.ts, bornOld), and a SLAB sweep stamps each claim with a reading taken right before it.
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, RateLimiter } from '../../src/index.js';
import { BUSY, EMPTY, H_SLOT_WORDS, HEADER_WORDS, S_CTRL, TOMB } from '../../src/table/layout.js';
import { slotCountOf } from '../../src/table/table-buffer.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { HASHED_LAYOUT, SLAB_LAYOUT } from '../helpers/layout.js';
import { pastTimeout, stagedReuse } from '../helpers/park.js';
import { duplicateKeys } from '../helpers/table-scan.js';

describe.each([['SLAB', SLAB_LAYOUT], ['HASHED', HASHED_LAYOUT]])('%s: a stop between the claim\'s clock reading and its compareExchange', (_name, layout) => {
  it('gives no key more than its burst', () => {
    const clock = new ManualClock(); // frozen: a key admits exactly 10
    const a = new RateLimiter({ limit: perHour(10), maxKeys: 16, clock, forceHash: 5, ...stagedReuse(1, 20), ...layout });
    const b = RateLimiter.attach(a.handle, { clock });
    const table = a.handle.table;
    const w = new Int32Array(table);
    const slotWords = w[H_SLOT_WORDS] as number;
    const slotsEnd = HEADER_WORDS + slotCountOf(w) * slotWords;
    // Every slot but one holds a key that is not idle (SLAB: so the other view's search lands
    // on the last one; HASHED: the one chain is full up to it).
    for (let i = 0; i < slotCountOf(w) - 1; i++) expect(a.allow(`k${i}`)).toBe(true);
    let phase = 0;
    let admittedB = 0;
    const isClaim = (arr: Int32Array, i: number, expected: number, value: number): boolean =>
      arr.buffer === table && i < slotsEnd && (i - HEADER_WORDS) % slotWords === S_CTRL &&
      ((expected & 3) === EMPTY || (expected & 3) === TOMB) && (value & 3) === BUSY;
    const other = (arr: Int32Array): void => {
      if (phase !== 1 || arr.buffer !== table) return;
      phase = 2;
      // Another thread, now: its insert finds the claim older than reuseAfterMs and takes the slot.
      for (let i = 0; i < 10; i++) if (b.allow('b')) admittedB++;
    };
    withAtomicsHooks({
      cas: (arr, i, expected, value) => {
        if (phase === 0 && isClaim(arr, i, expected, value)) {
          pastTimeout(25); // the stop: after the reading, before the claim (any length is allowed)
          phase = 1;
          return;
        }
        other(arr);
      },
      load: (arr) => other(arr),
    }, () => a.allow('a'));
    expect(phase).toBe(2);
    for (let i = 0; i < 10; i++) if (b.allow('b')) admittedB++;
    expect(duplicateKeys(table)).toEqual([]);
    expect(admittedB).toBe(10);
  });
});

it('SLAB: a sweep stopped before it claims a freed slot to clear its entry does not lose an entry placed meanwhile', () => {
  const clock = new ManualClock();
  const a = new RateLimiter({ limit: perHour(10), maxKeys: 16, clock, forceHash: 5, ...stagedReuse(1, 20), ...SLAB_LAYOUT });
  const b = RateLimiter.attach(a.handle, { clock });
  const table = a.handle.table;
  const w = new Int32Array(table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const slots = slotCountOf(w);
  const slotsEnd = HEADER_WORDS + slots * slotWords;
  expect(a.allow('old')).toBe(true);
  clock.advance(3_600_000); // 'old' is idle; the keys below are not
  for (let i = 0; i < slots - 1; i++) expect(a.allow(`k${i}`)).toBe(true);
  let phase = 0;
  let admitted = 0;
  withAtomicsHooks({
    cas: (arr, i, expected, value) => {
      if (phase !== 0 || arr.buffer !== table || i >= slotsEnd || (i - HEADER_WORDS) % slotWords !== S_CTRL) return;
      if ((expected & 3) !== TOMB || (value & 3) !== BUSY) return;
      pastTimeout(25); // the sweep stops before its claim (any length is allowed there)
      phase = 1;
    },
    load: (arr) => {
      if (phase !== 1 || arr.buffer !== table) return;
      phase = 2;
      // Another thread: its insert takes the slot (the claim is older than reuseAfterMs).
      for (let i = 0; i < 10; i++) if (b.allow('x')) admitted++;
    },
  }, () => a.sweep());
  expect(phase).toBe(2);
  expect(admitted).toBe(10);
  // A third thread (no cached slot for 'x'): it must find the key, not insert it again.
  // 6 minutes on: 'x' has earned one more admission, and the k keys are idle (room for a copy).
  clock.advance(361_000);
  const c = RateLimiter.attach(a.handle, { clock });
  let later = 0;
  for (let i = 0; i < 10; i++) if (c.allow('x')) later++;
  expect(duplicateKeys(table)).toEqual([]);
  expect(later).toBe(1);
});
