// `npm run bench` runs every suite and rewrites bench/RESULTS.md (and the SVG charts beside it).
// `npm run bench:quick` runs a smoke version of every suite and prints it without writing.
// `node bench/run.js [--quick] [suite ...]` runs only the named suites (printing, not writing).
// Chosen tables are compared row by row with the last published RESULTS.md (lib/previous.js).
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { machine } from './lib/measure.js';
import { dateOf, keptSections, withPrevious } from './lib/previous.js';

// Each suite is imported when it runs, so that a run of some suites needs only their packages.
const SUITES = {
  core: ['./core.js', 'runCore'],
  runtimes: ['./runtimes.js', 'runRuntimes'],
  peers: ['./peers.js', 'runPeers'],
  contention: ['./contention.js', 'runContention'],
  workers: ['./workers.js', 'runWorkers'],
  algorithms: ['./algorithms.js', 'runAlgorithms'],
  race: ['./race.js', 'runRace'],
  scaling: ['./scaling.js', 'runScaling'],
  churn: ['./churn.js', 'runChurn'],
  width: ['./width.js', 'runWidth'],
  observability: ['./observability.js', 'runObservability'],
  redis: ['./redis.js', 'runRedis'],
  'redis-outage': ['./redis-outage.js', 'runRedisOutage'],
  'redis-tier': ['./redis-tier.js', 'runRedisTier'],
  http: ['./http.js', 'runHttp'],
  'http-redis': ['./http-redis.js', 'runHttpRedis'],
};

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args.filter((a) => !a.startsWith('--'));
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
// --workers=1,2,4,8,16: the worker counts of the suites that scale over workers (contention, workers).
const workersFlag = flag('workers');
const workers = workersFlag === undefined ? undefined : workersFlag.split(',').map(Number);
if (workers !== undefined && (workers.length === 0 || !workers.every((n) => Number.isInteger(n) && n >= 1 && n <= 256))) {
  console.error(`--workers takes worker counts from 1 to 256, comma-separated; got ${JSON.stringify(workersFlag)}`);
  process.exit(2);
}
// --workloads=hot,1k: the contention suite's workloads whose names start so (default: all).
const workloads = flag('workloads')?.split(',');
// --svg-dir=DIR: where the charts go when the run does not publish (default: a temporary folder).
const svgDirFlag = flag('svg-dir');
for (const name of only) {
  if (!(name in SUITES)) {
    console.error(`unknown suite ${JSON.stringify(name)}; suites: ${Object.keys(SUITES).join(', ')}`);
    process.exit(2);
  }
}
const publish = !quick && only.length === 0;
const svgDir = publish ? new URL('./', import.meta.url) : pathToFileURL(`${svgDirFlag ?? mkdtempSync(join(tmpdir(), 'sluice-bench-'))}/`);

const m = machine();
const started = performance.now();
const sections = [];
for (const [name, [file, exported]] of Object.entries(SUITES)) {
  if (only.length > 0 && !only.includes(name)) continue;
  const t0 = performance.now();
  process.stderr.write(`running ${name}${quick ? ' (quick)' : ''}... `);
  const run = (await import(file))[exported];
  sections.push((await run({ quick, svgDir, ...(workers === undefined ? {} : { workers }), ...(workloads === undefined ? {} : { workloads }) })).markdown);
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
// Sections recorded on another machine (KEPT_MARK) stay, after this run's own.
const kept = publish ? keptSections(previous) : '';
const text = withPrevious(`${header.join('\n')}${[...sections, ...(kept === '' ? [] : [kept])].join('\n\n')}\n`, previous, dateOf(previous));
if (publish) writeFileSync(resultsUrl, text);
console.log(text);
