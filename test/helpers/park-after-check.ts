// Starts park-after-check-worker.mjs and resolves once it is parked right after its lock check.
import { Worker } from 'node:worker_threads';
import { H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL, S_KEY_BYTES, S_TAT } from '../../src/table/layout.js';
import { keyOffsetOf } from '../../src/table/table.js';

const url = new URL('../fixtures/park-after-check-worker.mjs', import.meta.url);
export const FROZEN_MS = 5_000;

/** The lock word index of the live slot holding the table key `key` (as the table encodes it). */
export function lockIndexOf(table: SharedArrayBuffer, key: string): number {
  const w = new Int32Array(table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const want = new TextEncoder().encode(key);
  for (let base = HEADER_WORDS; base + slotWords <= w.length; base += slotWords) {
    if (((w[base + S_CTRL] as number) & 3) !== LIVE || w[base + S_KEY_BYTES] !== want.length) continue;
    const bytes = new Uint8Array(w.buffer, (base + keyOffsetOf(w)) * 4, want.length);
    if (bytes.every((b, i) => b === want[i])) return base + S_TAT;
  }
  throw new Error(`no live slot for ${key}`);
}

export async function parkAfterCheck(kind: 'lease' | 'rate' | 'policy', handle: { table: SharedArrayBuffer }, request: unknown, cost: number, lockIndex: number) {
  const flags = new Int32Array(new SharedArrayBuffer(16));
  const worker = new Worker(url, { workerData: { kind, handle, request, cost, lockIndex, flags: flags.buffer, frozenMs: FROZEN_MS } });
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

export function pastTimeout(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}
