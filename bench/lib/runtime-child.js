// Run by bench/runtimes.js under one runtime: the core suite's single-thread and two-worker
// measurements (no memory table), printed as one JSON line of ratios.
import { runCore } from '../core.js';

const quick = process.argv.includes('--quick');
const { figures: f } = await runCore({ quick, withMemory: false });
const vs = (a, b) => f.res[a].median / f.res[b].median;
const runtime = globalThis.Bun !== undefined ? `Bun ${globalThis.Bun.version}`
  : globalThis.Deno !== undefined ? `Deno ${globalThis.Deno.version.deno}` : `Node ${process.versions.node}`;
console.log(JSON.stringify({
  runtime,
  allow: vs('sluice allow (boolean)', 'Map GCRA, allow (boolean)'),
  tryAcquire: vs('sluice tryAcquire (object)', 'Map GCRA, tryAcquire (object)'),
  coarse: vs('sluice allow, coarseClock()', 'Map GCRA, allow (boolean)'),
  table: vs('sluice allow, constant clock (table alone)', 'Map GCRA, allow (boolean)'),
  mapAllowNs: f.res['Map GCRA, allow (boolean)'].median,
  sluiceAllowNs: f.res['sluice allow (boolean)'].median,
  twoVsOne: f.ratio,
}));
