// Drives test/fixtures/cas-park-worker.mjs: a worker that makes one call on a limiter (and the
// calls in `then`), parking before chosen compare-and-swaps on a range of the table's words.
import { Worker } from 'node:worker_threads';
import { expect } from 'vitest';
import { HEADER_WORDS, H_SLOT_WORDS, H_STATE_OFFSET, LIVE, S_CTRL } from '../../src/table/layout.js';

const fixture = new URL('../fixtures/cas-park-worker.mjs', import.meta.url);

/** Releases a parked worker for good. */
export const ALL = 1_000_000;

/** What the worker answers: its first call's result, the others', its readings and every CAS in its range. */
export interface CasParkReply {
  allowed: boolean;
  results: (boolean | number | undefined)[];
  readings: number[];
  writes: { n: number; word: string; expected: number; replacement: number; landed: boolean }[];
}

export interface CasPark {
  worker: Worker;
  /** The CAS number it parked before (0: not yet; -1: finished). */
  parkedAt(): number;
  /** Lets it go on up to CAS number `upTo` (ALL: for good). */
  release(upTo: number): void;
  reply: Promise<CasParkReply>;
}

/**
 * Starts the worker on `handle` (a RateLimiter's, or with `policy` a PolicyLimiter's): `op` on
 * `key` ('allow', 'reset' or 'reward'), then `then` ([what, cost] each), parking before the CAS
 * numbers in `parkBefore` on the words [logFrom, logTo], before its first head word write with
 * `parkAtHead`, and before its first CAS there from and to the values `parkOn`.
 */
export function startCasPark(options: {
  handle: unknown; key: unknown; logFrom: number; logTo: number; parkBefore: number[];
  parkAtHead?: boolean; op?: string; policy?: boolean; then?: [string, number][]; parkOn?: [number, number];
}): CasPark {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(fixture, { workerData: { parkAtHead: false, ...options, flags: flags.buffer } });
  const reply = new Promise<CasParkReply>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const release = (upTo: number): void => {
    Atomics.store(flags, 1, upTo);
    Atomics.notify(flags, 1);
  };
  return { worker, parkedAt: () => Atomics.load(flags, 0), release, reply };
}

/** Resolves once `done()` holds; fails after 20 s. */
export async function until(what: string, done: () => boolean): Promise<void> {
  const end = Date.now() + 20_000;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** The first word of the state of the table's only live key. */
export function onlyKeyState(w: Int32Array): number {
  const found: number[] = [];
  for (let b = HEADER_WORDS; b + (w[H_SLOT_WORDS] as number) <= w.length; b += w[H_SLOT_WORDS] as number) {
    if (((w[b + S_CTRL] as number) & 3) === LIVE) found.push(b);
  }
  expect(found).toHaveLength(1);
  return (found[0] as number) + (w[H_STATE_OFFSET] as number);
}
