// Measurement helpers shared by every suite: batched tinybench tasks, allocation per call,
// the machine description, and small statistics.
import os from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
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

export function percentile(values, q) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export function median(values) {
  return percentile(values, 0.5);
}

const gc = globalThis.gc ?? (() => { v8.setFlagsFromString('--expose-gc'); return vm.runInNewContext('gc'); })();

/**
 * Heap bytes allocated per call of `fn`, measured as heap growth over `calls` calls with no
 * garbage collection in between (runs with a GC inside are discarded and repeated). Min of 5.
 */
export function bytesPerCall(fn, calls = 20_000) {
  let gcs = 0;
  const obs = new PerformanceObserver((list) => { gcs += list.getEntries().length; });
  obs.observe({ entryTypes: ['gc'] });
  const results = [];
  for (let attempt = 0; attempt < 50 && results.length < 5; attempt++) {
    for (let i = 0; i < 2_000; i++) fn(i); // warm
    gc();
    const before = process.memoryUsage().heapUsed;
    const gcsBefore = gcs;
    for (let i = 0; i < calls; i++) fn(i);
    const after = process.memoryUsage().heapUsed;
    if (gcs === gcsBefore) results.push(Math.max(0, (after - before) / calls));
  }
  obs.disconnect();
  return results.length ? Math.min(...results) : NaN;
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
