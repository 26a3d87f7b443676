// Shared by the worker-thread tests: spawning the fixture worker, awaiting its reply, and
// releasing a group of workers at once through a shared gate.
import { Worker } from 'node:worker_threads';

export const workerUrl = new URL('../fixtures/worker.mjs', import.meta.url);

/** Starts the fixture worker with `workerData`. */
export function spawn(workerData: Record<string, unknown>): Worker {
  return new Worker(workerUrl, { workerData });
}

/** The worker's next message (rejects on its error). */
export function result<T>(worker: Worker): Promise<T> {
  return new Promise((resolve, reject) => {
    // Each listener removes the other: a worker asked many times must not pile up listeners.
    const onMessage = (message: T): void => {
      worker.off('error', onError);
      resolve(message);
    };
    const onError = (error: Error): void => {
      worker.off('message', onMessage);
      reject(error);
    };
    worker.once('message', onMessage);
    worker.once('error', onError);
  });
}

/** Opens the start gate once `n` workers wait at it. */
export async function openGate(gate: SharedArrayBuffer, n: number): Promise<void> {
  const g = new Int32Array(gate);
  while (Atomics.load(g, 0) < n) await new Promise((r) => setTimeout(r, 1));
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
}

/** One round of a race: the workers' data (each gets its gate here), the checks on their replies, and what counts as a race. */
export interface RaceRound<T> {
  workers: Record<string, unknown>[];
  check(replies: T[]): void;
  /** The workers' fixture (default: fixtures/worker.mjs); it must call parkAfterFirstCall when given `parkCas`. */
  fixture?: URL;
  /** Whether the replies show that the workers raced (default: a compare-and-swap lost, `casRetries` > 0). */
  raced?(replies: T[]): boolean;
}

const lostCas = (replies: unknown[]): boolean => replies.some((r) => ((r as { casRetries?: number }).casRetries ?? 0) > 0);

/**
 * Runs rounds of racing workers until they raced, checking every round. Up to `tries` rounds
 * start together at a gate; by default a race is a failed compare-and-swap that a worker counted
 * (`casRetries`). If none raced (a busy machine can run them one after another), the next rounds
 * force it: worker 0 starts alone and parks before its first compare-and-swap after its first
 * `allow` (or the method its data names as `parkAfter`: fixtures/start.mjs, parkAfterFirstCall),
 * the others start once it parked, and it goes on once they finished. Its state then moved under
 * it: that compare-and-swap fails, which the worker records (a single GCRA limit does not count
 * a miss of its own last write in `casRetries`), and its first admission came before the
 * others' spends. A forced round that still shows no race (the worker finished without parking)
 * is run again, three times at most. Resolves to whether the race had to be forced.
 */
export async function raceUntilLost<T>(round: () => RaceRound<T>, tries = 10): Promise<boolean> {
  for (let attempt = 0; attempt < tries + 3; attempt++) {
    const forced = attempt >= tries;
    const { workers: data, check, fixture = workerUrl, raced = lostCas } = round();
    const { replies, lost } = forced ? await forcedRound<T>(fixture, data) : await gatedRound<T>(fixture, data);
    check(replies);
    if (lost || raced(replies)) return forced;
  }
  throw new Error(`no race in ${tries} rounds, nor in 3 with one forced`);
}

async function gatedRound<T>(fixture: URL, data: Record<string, unknown>[]): Promise<{ replies: T[]; lost: boolean }> {
  const gate = new SharedArrayBuffer(8);
  const workers = data.map((d) => new Worker(fixture, { workerData: { ...d, gate } }));
  try {
    await openGate(gate, workers.length);
    return { replies: await Promise.all(workers.map((w) => result<T>(w))), lost: false };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

async function forcedRound<T>(fixture: URL, data: Record<string, unknown>[]): Promise<{ replies: T[]; lost: boolean }> {
  const flags = new Int32Array(new SharedArrayBuffer(12)); // [0] worker 0 parked, [1] let it go, [2] its compare-and-swap failed
  const alone = new SharedArrayBuffer(8);
  const rest = new SharedArrayBuffer(8);
  const workers = data.map((d, i) => new Worker(fixture, { workerData: i === 0 ? { ...d, gate: alone, parkCas: flags.buffer } : { ...d, gate: rest } }));
  try {
    const first = result<T>(workers[0] as Worker);
    let finished = false;
    first.then(() => { finished = true; }, () => { finished = true; });
    await openGate(alone, 1);
    while (Atomics.load(flags, 0) === 0 && !finished) await new Promise((r) => setTimeout(r, 1));
    await openGate(rest, workers.length - 1);
    const others = await Promise.all(workers.slice(1).map((w) => result<T>(w)));
    Atomics.store(flags, 1, 1);
    Atomics.notify(flags, 1);
    const replies = [await first, ...others];
    return { replies, lost: Atomics.load(flags, 2) === 1 };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
