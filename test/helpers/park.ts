// Workers stopped at a chosen step, for tests that take a lock over, reclaim a key or reuse its
// slot while a request or a sweep is half done: `park` stops one at its Nth clock reading
// (fixtures/park-request-worker.mjs); park-after-check.ts stops one right after its lock check.
// Every parking worker shares the flags protocol: [0] parked, [1] go, [2] release the lease.
import { Worker } from 'node:worker_threads';
import { REUSE_AFTER_MS_OPTION } from '../../src/table/table-options.js';

const parkWorker = new URL('../fixtures/park-request-worker.mjs', import.meta.url);
export const FROZEN_MS = 5_000;

/** Spins for `ms` of real time: lock tokens are stamped with performance.now(). */
export function pastTimeout(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/**
 * A table's options for tests that stage a stall past its reuseAfterMs in real time: claimTimeoutMs,
 * and a reuseAfterMs of `reuseAfterMs`, 30x claimTimeoutMs unless given (REUSE_AFTER_MS_OPTION; by
 * default a table's is 30 s at least).
 */
export function stagedReuse(claimTimeoutMs: number, reuseAfterMs = 30 * claimTimeoutMs): { claimTimeoutMs: number; [REUSE_AFTER_MS_OPTION]: number } {
  return { claimTimeoutMs, [REUSE_AFTER_MS_OPTION]: reuseAfterMs };
}

/**
 * The kill storms' reuseAfterMs (with claimTimeoutMs 1: `stagedReuse(1, STORM_REUSE_MS)`): claims
 * and locks of dead workers are reused, and their keys reclaimed, once this old, which the checks
 * after a storm wait out. A live worker stalled that long inside an insert or a decision would
 * break the table's timing assumption (table/insert.ts, REUSE_AFTER_TIMEOUTS): found, at 30 ms
 * (30x claimTimeoutMs 1), in a PolicyLimiter storm on a loaded 2-core host.
 */
export const STORM_REUSE_MS = 1_000;

/**
 * Spins past the age at which a reclaim (sweep) takes a key's lock over in a table made with
 * `stagedReuse(claimTimeoutMs)`: 30x `claimTimeoutMs` (table/slot-lock.ts, LockAges). A decision
 * takes it over after claimTimeoutMs; a reclaim waits this long, since a holder stalled between
 * its checks and its writes would otherwise write into the slot's next key. Tests that stage
 * that stall wait it out.
 */
export function pastReclaimGuard(claimTimeoutMs: number): void {
  pastTimeout(30 * claimTimeoutMs + 5);
}

export interface Parked {
  worker: Worker;
  /** Whether it parked (false: it finished without reaching that step). */
  parked: boolean;
  next<T>(): Promise<T>;
  resume(): void;
  /** kind 'lease': release the lease now. */
  release(): void;
}

/**
 * Starts the parking worker at `url` with `workerData` (plus its `flags`) and resolves once it
 * parked or posted a message; its messages are queued for `next`.
 */
export async function startParked(url: URL, workerData: object): Promise<Parked> {
  const flags = new Int32Array(new SharedArrayBuffer(16));
  const worker = new Worker(url, { workerData: { ...workerData, flags: flags.buffer } });
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

/** Starts a park worker of `kind` and resolves once it parked at clock reading `parkAt` (or finished). */
export function park(kind: string, handle: unknown, request: unknown, cost: number, parkAt: number, frozenMs = FROZEN_MS): Promise<Parked> {
  return startParked(parkWorker, { kind, handle, request, cost, parkAt, frozenMs });
}

/**
 * Blocks this thread until the worker's state word `f[0]` is `state` (for a test that runs
 * another thread's steps inside an Atomics hook, where no await can wait; the worker runs
 * meanwhile); fails after 20 s.
 */
export function blockUntilState(f: Int32Array, state: number): void {
  const end = Date.now() + 20_000;
  for (let s = Atomics.load(f, 0); s !== state; s = Atomics.load(f, 0)) {
    if (Date.now() > end) throw new Error(`worker never reached state ${state} (at ${s})`);
    Atomics.wait(f, 0, s, 10);
  }
}

/** Sets `f[1]`, the go word of a worker that parks on its own flags, to `go`, and wakes it. */
export function letGo(f: Int32Array, go: number): void {
  Atomics.store(f, 1, go);
  Atomics.notify(f, 1);
}
