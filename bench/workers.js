// The workers suite: checks per second from one worker to many, for each lock-free configuration
// (one GCRA limit, two, one under a global cap, a fixed window), with the workers on keys of
// their own and on one shared key set, beside an unshared Map GCRA per worker (the ceiling).
// `node bench/run.js workers --workers=1,2,4,8,16` on a machine with that many cores.
import { writeFileSync } from 'node:fs';
import { perMinute, perSecond, RateLimiter } from 'sluice';
import { os } from './lib/os.js';
import { fmt, makeKeys, median } from './lib/measure.js';
import { lineChart } from './lib/svg.js';
import { workerRun } from './lib/throughput-run.js';

const KEY_COUNT = 1_000;
// No configuration refuses at any rate these workers reach: the rows measure admissions. The
// global cap is the one word every worker writes; 1e8 per second (burst 1e8) keeps it out of
// reach too, and is the widest cap that keeps its 32-bit word (2e8 takes the 64-bit path).
const WIDE = perSecond(1e6, { burst: 1e6 });
const WIDE_MINUTE = perMinute(6e7, { burst: 6e7 });
const WIDE_GLOBAL = perSecond(1e8, { burst: 1e8 });

const CONFIGS = [
  { name: 'GCRA, one limit', options: { limit: WIDE } },
  { name: 'GCRA, two limits', options: { limit: [WIDE, WIDE_MINUTE] } },
  { name: 'GCRA, one limit + global cap', options: { limit: WIDE, globalLimit: WIDE_GLOBAL } },
  { name: 'fixed window', options: { limit: WIDE, algorithm: 'fixed-window' } },
];

/** Worker i's keys: its own KEY_COUNT keys, or the shared set started at its own offset. */
function keySets(mode, n) {
  if (mode === 'own') return Array.from({ length: n }, (_, i) => makeKeys(KEY_COUNT, `w${i}:`));
  const shared = makeKeys(KEY_COUNT, 'shared:');
  return Array.from({ length: n }, (_, i) => {
    const at = Math.floor((i * KEY_COUNT) / n);
    return [...shared.slice(at), ...shared.slice(0, at)];
  });
}

export async function runWorkers({ quick = false, svgDir, workers = [1, 2, 4] } = {}) {
  const ms = quick ? 100 : 500;
  const rounds = quick ? 1 : 3;
  const rows = [];
  for (const mode of ['own', 'shared']) {
    for (const n of workers) {
      const sets = keySets(mode, n);
      const cells = CONFIGS.map((c) => {
        const limiter = new RateLimiter({ maxKeys: Math.max(KEY_COUNT * n, 1_000), ...c.options });
        for (const set of sets) for (const k of set) limiter.allow(k); // every key exists
        return { config: c.name, mode, workers: n, limiter, runs: [] };
      });
      const map = { config: 'Map GCRA per worker (unshared)', mode, workers: n, limiter: null, runs: [] };
      for (let r = 0; r < rounds; r++) { // rounds alternate between configurations
        for (const cell of [...cells, map]) {
          cell.runs.push(await workerRun(cell.limiter?.handle ?? null, n, sets, ms, cell.limiter ? null : WIDE));
        }
      }
      for (const cell of [map, ...cells]) {
        rows.push({
          config: cell.config, mode, workers: n,
          perSec: median(cell.runs.map((x) => x.perSec)),
          all: cell.runs.map((x) => x.perSec),
          allowed: median(cell.runs.map((x) => x.allowedShare)),
          retries: median(cell.runs.map((x) => x.retriesPerMillion)),
        });
      }
    }
  }
  return { markdown: render(rows, { quick, ms, rounds, workers, svgDir }), figures: { rows } };
}

function render(rows, { ms, rounds, workers, svgDir }) {
  const at = (config, mode, n) => rows.find((r) => r.config === config && r.mode === mode && r.workers === n);
  const names = ['Map GCRA per worker (unshared)', ...CONFIGS.map((c) => c.name)];
  const lines = ['## Workers: checks per second from one worker to many', ''];
  lines.push(`Each worker checks its ${fmt(KEY_COUNT)} keys in turn with \`allow\` (default clock) for ${fmt(ms)} ms, all released at once; ` +
    `median of ${rounds} round${rounds > 1 ? 's' : ''}, rounds alternating between the rows of one worker count. "own keys": each worker its own ${fmt(KEY_COUNT)} keys, ` +
    `so no two workers write one word but a global cap's; "shared keys": every worker on the same ${fmt(KEY_COUNT)} keys, each starting at its own offset. ` +
    `No limit is reached (see "allowed"). "vs 1 worker": this row's throughput over its own one-worker figure; "vs one limit": over one GCRA limit's at the same count. ` +
    `Retries: failed compareExchanges per million checks in the timed loops. This machine has ${os.cores} cores` +
    `${Math.max(...workers) > os.cores ? `: ${Math.max(...workers)} workers oversubscribe it` : ''}.`, '');
  lines.push('| configuration | keys | workers | checks/s (median) | all rounds (M) | vs 1 worker | vs one limit | allowed | retries per M |',
    '|---|---|---:|---:|---|---:|---:|---:|---:|');
  for (const mode of ['own', 'shared']) {
    for (const name of names) {
      const base = at(name, mode, workers[0]);
      for (const n of workers) {
        const r = at(name, mode, n);
        const one = at('GCRA, one limit', mode, n);
        const vsOne = name.startsWith('Map') || name === 'GCRA, one limit' ? '' : `${fmt(r.perSec / one.perSec, 2)}x`;
        const scale = workers[0] === 1 ? `${fmt(r.perSec / base.perSec, 2)}x` : '';
        const retries = name.startsWith('Map') ? '' : fmt(r.retries, 1);
        lines.push(`| ${name} | ${mode} | ${n} | ${fmt(r.perSec)} | ${r.all.map((x) => fmt(x / 1e6, 2)).join(', ')} | ${scale} | ${vsOne} | ${fmt(r.allowed * 100, 1)}% | ${retries} |`);
      }
    }
  }
  if (svgDir) {
    const charts = [];
    for (const mode of ['own', 'shared']) {
      const series = names.map((name) => ({ name, points: workers.map((n) => [n, at(name, mode, n).perSec]) }));
      const file = `workers-${mode}-keys.svg`;
      writeFileSync(new URL(file, svgDir), lineChart({ title: `${mode} keys: checks/s vs workers (${os.cores} cores)`, xLabel: 'workers', yLabel: 'checks per second', series }));
      charts.push(file);
    }
    lines.push('', ...charts.map((f) => `![${f}](${f})`));
  }
  return lines.join('\n');
}
