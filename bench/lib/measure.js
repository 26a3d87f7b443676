// Measurement helpers shared by every suite: batched tinybench tasks, allocation per call,
// the machine description, and small statistics.
import os from 'node:os';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Bench } from 'tinybench';

/** Operations per tinybench iteration: single calls (~100 ns) are too short to time one by one. */
export const BATCH = 1_000;

/** 24-character keys, as the workload asks. */
export function makeKeys(n, prefix = 'k') {
  return Array.from({ length: n }, (_, i) => `${prefix}:tenant-${String(i).padStart(7, '0')}:api`.padEnd(24, '.').slice(0, 24));
}

/**
 * Runs tinybench over named batch functions in one Bench (so they share the run) and returns
 * ns per call: median and the spread (p25..p75) over samples.
 */
export async function nsPerCall(tasks, { timeMs = 1_500, warmupMs = 300 } = {}) {
  const bench = new Bench({ time: timeMs, warmupTime: warmupMs, retainSamples: true });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  await bench.run();
  const out = {};
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== 'completed') throw new Error(`${task.name}: ${r.state} ${r.error ?? ''}`);
    out[task.name] = {
      median: (r.latency.p50 * 1e6) / BATCH,
      p25: (percentile(r.latency.samples ?? [], 0.25) * 1e6) / BATCH,
      p75: (percentile(r.latency.samples ?? [], 0.75) * 1e6) / BATCH,
      samples: r.latency.samplesCount ?? r.latency.samples?.length ?? 0,
    };
  }
  return out;
}

/**
 * `nsPerCall` in `rounds` rounds, the tasks forward in even rounds and backward in odd ones, so
 * that a busy spell of the machine or a heap state that one task leaves behind moves a whole
 * round, not one contestant. Per name: the median over rounds of each round's median (p25 and
 * p75 likewise) and every round's median (`rounds`, for `pairedRatio`). `onRound(round)` runs
 * after each round, outside the timed part.
 */
export async function nsPerCallPaired(tasks, { rounds, onRound, ...timing }) {
  const names = Object.keys(tasks);
  const perRound = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? names : [...names].reverse();
    const res = await nsPerCall(Object.fromEntries(order.map((n) => [n, tasks[n]])), timing);
    for (const n of names) perRound[n].push(res[n]);
    onRound?.(r);
  }
  const out = {};
  for (const n of names) {
    out[n] = {
      median: median(perRound[n].map((x) => x.median)),
      p25: median(perRound[n].map((x) => x.p25)),
      p75: median(perRound[n].map((x) => x.p75)),
      rounds: perRound[n].map((x) => x.median),
    };
  }
  return out;
}

/** The median over rounds of one row's time over another's in the same round (rows of `nsPerCallPaired`). */
export function pairedRatio(a, b) {
  return median(a.rounds.map((x, r) => x / b.rounds[r]));
}

export function percentile(values, q) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export function median(values) {
  return percentile(values, 0.5);
}

/** A full garbage collection. Bun has no V8 flag to expose gc() (vm.runInNewContext('gc') throws there): it has Bun.gc(true). */
export const gc = globalThis.gc ?? (globalThis.Bun ? () => globalThis.Bun.gc(true) : (() => { v8.setFlagsFromString('--expose-gc'); return vm.runInNewContext('gc'); })());

/**
 * Heap bytes allocated per call, measured as heap growth over `calls` calls with no garbage
 * collection in between: `v8.GCProfiler` records every collection, also inside a synchronous
 * loop, and runs in which one happened are discarded. Minimum of up to 5 clean runs (of 50 tried).
 * `run(n)` makes n calls and may return a promise (for asynchronous contestants).
 */
export async function bytesPerRun(run, calls = 20_000) {
  const results = [];
  let attempts = 0;
  for (; attempts < 50 && results.length < 5; attempts++) {
    await run(2_000); // warm
    gc();
    const profiler = new v8.GCProfiler();
    profiler.start();
    const before = process.memoryUsage().heapUsed;
    const pending = run(calls); // a synchronous run returns undefined and is not awaited
    if (pending) await pending;
    const after = process.memoryUsage().heapUsed;
    const { statistics } = profiler.stop();
    if (statistics.length === 0) results.push(Math.max(0, (after - before) / calls));
  }
  return { bytes: results.length ? Math.min(...results) : NaN, runs: results.length, attempts };
}

/** `bytesPerRun` for a synchronous per-call function `fn(i)`; returns bytes per call. */
export async function bytesPerCall(fn, calls = 20_000) {
  const { bytes } = await bytesPerRun((n) => { for (let i = 0; i < n; i++) fn(i); }, calls);
  return bytes;
}

export function machine() {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model?.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    date: new Date().toISOString().slice(0, 10),
  };
}

export const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : String(n));
