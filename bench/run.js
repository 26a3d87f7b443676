// `npm run bench` runs every suite and rewrites bench/RESULTS.md (and the SVG charts beside it).
// `npm run bench:quick` runs a smoke version of every suite and prints it without writing.
// `node bench/run.js [--quick] [suite ...]` runs only the named suites (printing, not writing).
// Chosen tables are compared row by row with the last published RESULTS.md (lib/previous.js).
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runAlgorithms } from './algorithms.js';
import { runChurn } from './churn.js';
import { runContention } from './contention.js';
import { runCore } from './core.js';
import { runHttp } from './http.js';
import { runHttpRedis } from './http-redis.js';
import { machine } from './lib/measure.js';
import { dateOf, withPrevious } from './lib/previous.js';
import { runObservability } from './observability.js';
import { runPeers } from './peers.js';
import { runRace } from './race.js';
import { runRedis } from './redis.js';
import { runRedisOutage } from './redis-outage.js';
import { runRedisTier } from './redis-tier.js';
import { runRuntimes } from './runtimes.js';
import { runScaling } from './scaling.js';
import { runWidth } from './width.js';

const SUITES = {
  core: runCore,
  runtimes: runRuntimes,
  peers: runPeers,
  contention: runContention,
  algorithms: runAlgorithms,
  race: runRace,
  scaling: runScaling,
  churn: runChurn,
  width: runWidth,
  observability: runObservability,
  redis: runRedis,
  'redis-outage': runRedisOutage,
  'redis-tier': runRedisTier,
  http: runHttp,
  'http-redis': runHttpRedis,
};

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args.filter((a) => !a.startsWith('--'));
for (const name of only) {
  if (!(name in SUITES)) {
    console.error(`unknown suite ${JSON.stringify(name)}; suites: ${Object.keys(SUITES).join(', ')}`);
    process.exit(2);
  }
}
const publish = !quick && only.length === 0;
const svgDir = publish ? new URL('./', import.meta.url) : pathToFileURL(`${mkdtempSync(join(tmpdir(), 'sluice-bench-'))}/`);

const m = machine();
const started = performance.now();
const sections = [];
for (const [name, run] of Object.entries(SUITES)) {
  if (only.length > 0 && !only.includes(name)) continue;
  const t0 = performance.now();
  process.stderr.write(`running ${name}${quick ? ' (quick)' : ''}... `);
  sections.push((await run({ quick, svgDir })).markdown);
  process.stderr.write(`${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
}
const header = [
  '# sluice benchmark results',
  '',
  `Written by \`npm run bench${quick ? ':quick' : ''}\` on ${m.date} in ${((performance.now() - started) / 60_000).toFixed(1)} minutes. ` +
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}.`,
  'This machine is shared and noisy: read the ratios measured side by side in one run, not single absolute figures. ' +
    'How to read and reproduce these tables: [bench/README.md](README.md).',
  '',
];
// The algorithms, contention and peers tables, row by row against the last published run.
const resultsUrl = new URL('./RESULTS.md', import.meta.url);
const previous = existsSync(resultsUrl) ? readFileSync(resultsUrl, 'utf8') : '';
const text = withPrevious(`${header.join('\n')}${sections.join('\n\n')}\n`, previous, dateOf(previous));
if (publish) writeFileSync(resultsUrl, text);
console.log(text);
