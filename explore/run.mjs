// npm run explore: the bounded search CI runs over every scenario, or more.
//
//   npm run explore                       every scenario: DFS to the CI bounds, then PCT runs
//   npm run explore -- --deep             higher bounds and many more PCT runs
//   npm run explore -- --scenario a,b     only these scenarios
//   npm run explore -- --replay "4:1 9:2" --scenario a
//                                         one schedule, its whole trace printed
//   npm run explore -- --jobs 2           two processes, each with half the scenarios (slower on 2
//                                         cores: a controller and its running thread each spin)
//   npm run explore -- --budget 600       each DFS runs up to 600 s (instead of the mode's budget)
//   npm run explore -- --mutations [name] re-plants each known bug in a copy of dist/ and shows
//                                         that the explorer finds it (and how long it took)
//
// Exits 1 on a violation (or on a re-planted bug it did not find).
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Explorer } from './controller.mjs';
import { libraryOf } from './lib.mjs';
import { Dfs, Pct, Replay, search, verdict } from './search.mjs';
import { SCENARIOS } from './scenarios/index.mjs';
import { MUTATIONS } from './mutations/index.mjs';

const DIST = new URL('../dist/', import.meta.url);

/**
 * The whole CI search's time: what `npm run explore` may take (about 3 minutes on 2 cores, less
 * the explorer's start and close; raised from 160 s to 170 s with the 62nd scenario, so that the
 * search still starts with more than half of every budget). The scenarios' budgets add up to more, but most DFS searches end
 * before theirs; when the earlier scenarios have left too little, the later ones' budgets shrink
 * (said in the log), so a slow or busy machine explores less, not for longer.
 */
export const CI_TOTAL_MS = 170_000;
/** No scenario's budgets shrink below this share of its own. */
const MIN_SHARE = 0.25;
/** The share of their budgets the CI scenarios took as a whole, measured (160 s of 219 s). */
const USED_SHARE = 0.75;

/** The bounds of each mode; a scenario may lower them (`bounds`). */
export const MODES = {
  ci: { preemptions: 2, timeMoves: 1, staleReads: 1, dfsBudgetMs: 8_000, pctRuns: 150, pctBudgetMs: 2_000, pctDepth: 3 },
  deep: { preemptions: 3, timeMoves: 2, staleReads: 2, dfsBudgetMs: 120_000, pctRuns: 5_000, pctBudgetMs: 60_000, pctDepth: 4 },
};

function parseArgs(argv) {
  const args = { deep: false, mutations: null, scenarios: null, replay: null, quiet: false, jobs: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--deep') args.deep = true;
    else if (a === '--quiet') args.quiet = true;
    else if (a === '--scenario') args.scenarios = argv[++i].split(',');
    else if (a === '--replay') args.replay = argv[++i];
    else if (a === '--jobs') args.jobs = Number(argv[++i]);
    else if (a === '--budget') args.budgetS = Number(argv[++i]);
    else if (a === '--mutations') args.mutations = argv[i + 1] !== undefined && !argv[i + 1].startsWith('--') ? argv[++i].split(',') : [];
    else throw new RangeError(`explore: unknown argument ${JSON.stringify(a)}`);
  }
  return args;
}

/** One line per step of a run: thread, step, what it did to which word, what it saw. */
export function formatTrace(exec, scenario, lib, { last = Infinity } = {}) {
  const names = scenario.names?.(exec.buffers, lib) ?? ((buf, byte) => `buffer ${buf} byte ${byte}`);
  const lines = [];
  const from = Math.max(0, exec.trace.length - last);
  if (from > 0) lines.push(`  ... ${from} steps before`);
  for (const e of exec.trace.slice(from)) {
    const v = (x) => (typeof x === 'bigint' ? `${x}n` : Number.isNaN(x) ? '' : String(x));
    let what;
    if (e.kind === 'clock') what = `clock ${scenario.time.moves[e.move].name} -> ${v(e.result)} ms`;
    else {
      const word = names(e.buf, e.byte);
      const args = e.kind === 'cas' ? ` expect ${v(e.a0)} set ${v(e.a1)}` : ['load', 'read', 'notify'].includes(e.kind) ? '' : ` ${v(e.a0)}`;
      what = `${e.kind} ${word}${args} -> ${v(e.result)}${e.stale ? ' (stale: the value before its latest write)' : ''}`;
    }
    lines.push(`  ${String(e.step).padStart(4)}  T${e.thread}  ${what}`);
  }
  for (const r of exec.reports) for (const c of r.calls) lines.push(`  T${r.thread} ${c.label} -> ${JSON.stringify(c.result)}${c.error ? ` threw ${c.error.split('\n')[0]}` : ''} (readings ${c.readings.join(', ')}; steps ${c.firstStep}-${c.lastStep})`);
  return lines.join('\n');
}

/** A scenario's bounds in `mode`: the mode's, the scenario's own, then `--budget`. */
function boundsOf(scenario, mode, budgetS) {
  return { ...MODES[mode], ...scenario.bounds?.[mode], ...(budgetS === undefined ? {} : { dfsBudgetMs: budgetS * 1000 }) };
}

/** A scenario's CI budgets, DFS and PCT, in ms. */
function ciBudgetMs(entry) {
  const b = boundsOf(entry.scenario, 'ci');
  return b.dfsBudgetMs + b.pctBudgetMs;
}

/**
 * The share of their budgets the scenarios `rest` may take so that the search ends within
 * CI_TOTAL_MS of its start, `elapsedMs` ago, if they use USED_SHARE of them as a whole (many
 * DFS searches end early): at most 1, at least MIN_SHARE. Asked again before each scenario, so
 * time that earlier ones left unused goes to the later ones, and a shortfall is spread over all
 * of those left rather than taken from the last.
 */
export function budgetShare(rest, elapsedMs) {
  const wanted = rest.reduce((sum, e) => sum + ciBudgetMs(e), 0);
  return Math.max(MIN_SHARE, Math.min(1, (CI_TOTAL_MS - elapsedMs) / (USED_SHARE * wanted)));
}

async function exploreOne(explorer, entry, mode, log, budgetS, share = 1) {
  const { url, scenario } = entry;
  const bounds = boundsOf(scenario, mode, budgetS);
  if (share < 1) {
    bounds.dfsBudgetMs = Math.round(bounds.dfsBudgetMs * share);
    bounds.pctBudgetMs = Math.round(bounds.pctBudgetMs * share);
  }
  const dfs = new Dfs(bounds);
  const a = await search(explorer, url, scenario, dfs, { nextRun: (c) => c.next(), budgetMs: bounds.dfsBudgetMs, maxSteps: scenario.maxSteps });
  const out = { name: scenario.name, bounds, dfs: a, pct: null };
  if (a.violation === null) {
    let seed = 1;
    const pct = new Pct({
      seed, depth: bounds.pctDepth, length: Math.max(16, Math.ceil(a.steps / Math.max(1, a.runs))),
      timeMoves: bounds.timeMoves, staleReads: bounds.staleReads,
    });
    out.pct = await search(explorer, url, scenario, pct, {
      nextRun: (c) => { c.seed = ++seed; return true; }, maxRuns: bounds.pctRuns, budgetMs: bounds.pctBudgetMs, maxSteps: scenario.maxSteps,
    });
    out.pct.firstSeed = 1;
  }
  // Iterative deepening: every level below the one the budget stopped in ran out.
  const through = a.complete ? 'complete' : `complete to cost ${dfs.level - 1} of ${dfs.top}`;
  out.completeTo = a.complete ? dfs.top : dfs.level - 1;
  log(`${scenario.name.padEnd(28)} dfs ${String(a.runs).padStart(6)} schedules (${through}) ${(a.ms / 1000).toFixed(1).padStart(6)} s` +
    (out.pct ? ` | pct ${out.pct.runs} runs ${(out.pct.ms / 1000).toFixed(1)} s` : '') +
    (share < 1 ? ` (budgets at ${Math.round(share * 100)}% to end in time)` : ''));
  return out;
}

function report(result, entry, lib, log) {
  const v = result.dfs.violation ?? result.pct?.violation;
  if (!v) return false;
  log(`\nVIOLATION in ${result.name}: ${v.message}`);
  log(`schedule: "${v.schedule}"${v.seed !== null && v.seed !== undefined ? ` (PCT seed ${v.seed})` : ''}   replay: npm run explore -- --scenario ${result.name} --replay "${v.schedule}"`);
  if (v.exec) log(formatTrace(v.exec, entry.scenario, lib, { last: 60 }));
  return true;
}

export async function main(argv, log = console.log, dist = DIST) {
  const args = parseArgs(argv);
  const lib = await libraryOf(new URL('index.js', dist).href);
  const chosen = args.scenarios === null ? SCENARIOS : SCENARIOS.filter((s) => args.scenarios.includes(s.scenario.name));
  if (args.scenarios !== null && chosen.length !== args.scenarios.length) throw new RangeError(`explore: unknown scenario in ${args.scenarios.join(', ')}`);
  const names = args.mutations !== null
    ? (args.mutations.length === 0 ? MUTATIONS : MUTATIONS.filter((m) => args.mutations.includes(m.name))).map((m) => m.name)
    : chosen.map((c) => c.scenario.name);
  if (args.replay === null && args.jobs > 1 && names.length > 1) return inParallel(args, names, log);
  if (args.mutations !== null) return mutations(args, log);
  const explorer = new Explorer(3, new URL('index.js', dist).href);
  try {
    if (args.replay !== null) {
      const entry = chosen[0];
      const exec = await explorer.run(entry.url, entry.scenario, new Replay(args.replay), { maxSteps: entry.scenario.maxSteps });
      log(formatTrace(exec, entry.scenario, lib));
      const message = verdict(entry.scenario, exec, lib);
      log(message === null ? 'no violation' : `VIOLATION: ${message}`);
      return message === null ? 0 : 1;
    }
    let failed = false;
    const started = performance.now();
    for (const [i, entry] of chosen.entries()) {
      // CI mode's own budgets share CI_TOTAL_MS; --deep and --budget runs take what they ask for.
      const share = args.deep || args.budgetS !== undefined ? 1 : budgetShare(chosen.slice(i), performance.now() - started);
      const result = await exploreOne(explorer, entry, args.deep ? 'deep' : 'ci', log, args.budgetS, share);
      if (report(result, entry, lib, log)) failed = true;
    }
    log(`${chosen.length} scenarios in ${((performance.now() - started) / 1000).toFixed(1)} s: ${failed ? 'VIOLATIONS' : 'no violation'}`);
    return failed ? 1 : 0;
  } finally {
    await explorer.close();
  }
}

/**
 * Splits the scenarios (or mutations) between `jobs` processes, each with its own explorer, and
 * prints each one's output when it ends. A controller and the thread it let go each spin while
 * the other runs, so one explorer keeps two cores busy: on 2 cores, two processes explored 4x
 * fewer schedules than one (fixed-window and sliding-window, 15 s each).
 */
async function inParallel(args, names, log) {
  const groups = Array.from({ length: args.jobs }, () => []);
  names.forEach((name, i) => groups[i % args.jobs].push(name));
  const started = performance.now();
  const codes = await Promise.all(groups.filter((g) => g.length > 0).map((group) => new Promise((resolve) => {
    const flags = [...(args.deep ? ['--deep'] : []), ...(args.budgetS === undefined ? [] : ['--budget', String(args.budgetS)]), '--jobs', '1', ...(args.mutations !== null ? ['--mutations', group.join(',')] : ['--scenario', group.join(',')])];
    const child = spawn(process.execPath, [new URL(import.meta.url).pathname, ...flags], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.on('close', (code) => { log(out.trimEnd()); resolve(code ?? 1); });
  })));
  log(`${names.length} ${args.mutations !== null ? 'mutations' : 'scenarios'} in ${args.jobs} processes, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return codes.some((c) => c !== 0) ? 1 : 0;
}

/** A copy of dist/ with one mutation applied; its index.js URL. */
export function mutatedDist(m) {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-mutant-'));
  cpSync(new URL(DIST).pathname, dir, { recursive: true });
  for (const edit of m.edits) {
    const file = join(dir, edit.file);
    const text = readFileSync(file, 'utf8');
    const count = text.split(edit.from).length - 1;
    if (count !== 1) throw new Error(`mutation ${m.name}: ${edit.file} holds its text ${count} times, not once`);
    writeFileSync(file, text.replace(edit.from, edit.to));
  }
  return { dir, url: pathToFileURL(join(dir, 'index.js')).href };
}

async function mutations(args, log) {
  const chosen = args.mutations.length === 0 ? MUTATIONS : MUTATIONS.filter((m) => args.mutations.includes(m.name));
  let missed = 0;
  for (const m of chosen) {
    const { dir, url } = mutatedDist(m);
    const explorer = new Explorer(3, url);
    const started = performance.now();
    try {
      const entry = SCENARIOS.find((s) => s.scenario.name === m.scenario);
      if (entry === undefined) throw new Error(`mutation ${m.name}: no scenario ${m.scenario}`);
      const mode = args.deep || m.deep === true ? 'deep' : 'ci';
      const result = await exploreOne(explorer, entry, mode, () => {}, args.budgetS ?? m.budgetS);
      const v = result.dfs.violation ?? result.pct?.violation;
      const s = `${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s ${mode.padEnd(4)}`;
      // A ReferenceError or SyntaxError is the edit's own fault (a name the build no longer has),
      // not the planted bug found: such a mutation has gone stale and must be written again.
      if (v && /\b(ReferenceError|SyntaxError)\b/.test(v.message)) { missed++; log(`BROKEN  ${m.name.padEnd(52)} ${s}  ${m.scenario}: ${v.message.slice(0, 100)}`); }
      else if (v) log(`found   ${m.name.padEnd(52)} ${s}  ${m.scenario}: ${v.message.slice(0, 100)} (schedule "${v.schedule}")`);
      else { missed++; log(`MISSED  ${m.name.padEnd(52)} ${s}  ${m.scenario}`); }
    } finally {
      await explorer.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return missed === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
