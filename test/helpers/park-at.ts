// Starts park-at-worker.mjs (test/helpers/park-after-check.ts with a chosen frozen clock) and
// resolves once it parked (or finished).
import { Worker } from 'node:worker_threads';
import { H_STATE_OFFSET, S_CTRL, S_TAT } from '../../src/table/layout.js';
import { lockIndexOf } from './park-after-check.js';

export { lockIndexOf, pastTimeout } from './park-after-check.js';
const url = new URL('../fixtures/park-at-worker.mjs', import.meta.url);

export async function parkAt(kind: 'lease' | 'stats', handle: { table: SharedArrayBuffer }, frozenMs: number, lockIndex: number, request = '', cost = 0, loadNo = 0) {
  const flags = new Int32Array(new SharedArrayBuffer(16));
  const worker = new Worker(url, { workerData: { kind, handle, request, cost, lockIndex, loadNo, flags: flags.buffer, frozenMs } });
  const messages: unknown[] = [];
  let wake: (() => void) | null = null;
  let failure: unknown = null;
  worker.on('message', (m) => { messages.push(m); wake?.(); });
  worker.on('error', (e) => { failure = e; wake?.(); });
  const next = async <T>(): Promise<T> => {
    while (messages.length === 0) {
      if (failure !== null) throw failure;
      await new Promise<void>((r) => { wake = r; });
    }
    return messages.shift() as T;
  };
  while (Atomics.load(flags, 0) === 0 && messages.length === 0) {
    if (failure !== null) throw failure;
    await new Promise((r) => setTimeout(r, 1));
  }
  const go = (i: number) => { Atomics.store(flags, i, 1); Atomics.notify(flags, i); };
  return { worker, parked: Atomics.load(flags, 0) === 1, next, resume: () => go(1), release: () => go(2) };
}

/** The slot of `key`: its ctrl word and its place words (a snapshot). */
export function slotOf(table: SharedArrayBuffer, key: string, maxInFlight: number): { base: number; ctrl: number; places: number[] } {
  const w = new Int32Array(table);
  const base = lockIndexOf(table, key) - S_TAT;
  const at = base + (w[H_STATE_OFFSET] as number);
  return { base, ctrl: w[base + S_CTRL] as number, places: Array.from(w.subarray(at, at + maxInFlight)) };
}
