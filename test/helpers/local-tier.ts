// Shared by the local tier's tests: starting its fixture worker, parking and releasing it, and
// reading a key's words straight from the shared buffer.
import { Worker } from 'node:worker_threads';
import { LocalTier } from '../../src/redis/local-tier.js';
import { DEAD_HI, FIELD_MASK, LEASE, REFUSAL, stampOf } from '../../src/redis/local-tier-slot.js';
import { H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL, S_KEY_BYTES } from '../../src/table/layout.js';
import { keyOffsetOf, stateOffsetOf } from '../../src/table/table-buffer.js';

const workerUrl = new URL('../fixtures/local-tier-worker.mjs', import.meta.url);

/** A started worker and its messages, in order. */
export interface Started {
  worker: Worker;
  next<T = Record<string, unknown>>(): Promise<T>;
  /** Set once the worker sent its last expected message or exited. */
  exited: { done: boolean };
}

export function startWorker(workerData: Record<string, unknown>): Started {
  const worker = new Worker(workerUrl, { workerData });
  const queue: unknown[] = [];
  const waiting: ((m: unknown) => void)[] = [];
  const failures: ((e: unknown) => void)[] = [];
  const exited = { done: false };
  worker.on('message', (m) => {
    const w = waiting.shift();
    failures.shift();
    if (w) w(m);
    else queue.push(m);
  });
  worker.on('error', (e) => {
    for (const f of failures.splice(0)) f(e);
  });
  worker.on('exit', () => { exited.done = true; });
  return {
    worker,
    exited,
    next<T>() {
      if (queue.length > 0) return Promise.resolve(queue.shift() as T);
      return new Promise<T>((resolve, reject) => {
        waiting.push(resolve as (m: unknown) => void);
        failures.push(reject);
      });
    },
  };
}

/** flags = [parked, release] for a parking worker. */
export function parkFlags(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(8));
}

/** Resolves once the worker parked. */
export async function whenParked(flags: Int32Array): Promise<void> {
  while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
}

export function release(flags: Int32Array): void {
  Atomics.store(flags, 1, 1);
  Atomics.notify(flags, 1);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A 64-bit word of a slot, decoded. */
export interface Word { stamp: number; field: number; dead: boolean }

function decode(w: Int32Array, at: number): Word {
  const lo = w[at] as number;
  const hi = w[at + 1] as number;
  return { stamp: stampOf(hi, lo), field: lo & FIELD_MASK, dead: hi === DEAD_HI };
}

/** Every live slot's key (LIVE and not reclaimed) with its refusal and lease words. */
export function liveSlots(tier: LocalTier): { key: string; refusal: Word; lease: Word }[] {
  const w = new Int32Array(tier.handle.table);
  const bytes = new Uint8Array(tier.handle.table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const so = stateOffsetOf(w);
  const out: { key: string; refusal: Word; lease: Word }[] = [];
  const capacity = tier.stats().capacity;
  for (let slot = 0; slot < capacity; slot++) {
    const base = HEADER_WORDS + slot * slotWords;
    if (((w[base + S_CTRL] as number) & 3) !== LIVE || w[base + so + REFUSAL + 1] === DEAD_HI) continue;
    const start = (base + keyOffsetOf(w)) * 4;
    const key = new TextDecoder().decode(bytes.slice(start, start + (w[base + S_KEY_BYTES] as number)));
    out.push({ key, refusal: decode(w, base + so + REFUSAL), lease: decode(w, base + so + LEASE) });
  }
  return out;
}

/** The lease word of `key`'s live slot (undefined when the key has none). */
export function leaseOf(tier: LocalTier, key: string): Word | undefined {
  return liveSlots(tier).find((s) => s.key === key)?.lease;
}
