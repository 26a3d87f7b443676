// The check of a reset race on a frozen clock (test/fixtures/worker.mjs, mode 'reset-race': every
// worker spends key 'k' and resets it now and then), shared by the sliding log's locked reset and
// the windows' lock-free one.
import { expect } from 'vitest';
import type { RateLimiter } from '../../src/index.js';

/** What a 'reset-race' worker reports. */
export interface ResetRaceReply {
  admitted: number;
  resets: number;
  /** Its resets that found the key owing. */
  owed: number;
  /** How often one of its refusals was followed by an admission with no reset of its own between. */
  between: number;
}

/**
 * Nothing expires on the frozen clock, so key 'k' of `l` admits at most `permits` after each reset
 * that found it owing, and nothing more: admitted <= permits x (1 + owing resets); each owing reset
 * followed an admission; what the key has left at the end is within its permits.
 */
export function checkResetRace(replies: ResetRaceReply[], l: RateLimiter, permits: number): void {
  const sum = (f: (r: ResetRaceReply) => number) => replies.reduce((a, r) => a + f(r), 0);
  const admitted = sum((r) => r.admitted);
  const owed = sum((r) => r.owed);
  expect(owed).toBeGreaterThan(0);
  expect(admitted).toBeLessThanOrEqual(permits * (1 + owed));
  expect(admitted).toBeGreaterThanOrEqual(owed);
  const left = l.get('k')?.remaining ?? permits;
  expect(left).toBeGreaterThanOrEqual(0);
  expect(left).toBeLessThanOrEqual(permits);
}
