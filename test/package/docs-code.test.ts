import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { blocksOf, docFiles, typeCheck } from '../helpers/doc-blocks.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const blocks = docFiles(root).flatMap((f) => blocksOf(root, f));

describe('code blocks in the README and docs/', () => {
  it('every js and ts block type-checks against the built package', () => {
    const code = blocks.filter((b) => b.lang === 'js' || b.lang === 'ts');
    const errors = typeCheck(root, code).flatMap((r) => r.errors);
    expect(errors).toEqual([]);
  }, 60_000);
});

/** Each command line of the `sh` blocks, without its comment; `&&` splits a line into two. */
function commands(): { where: string; argv: string[] }[] {
  const out: { where: string; argv: string[] }[] = [];
  for (const b of blocks.filter((x) => x.lang === 'sh')) {
    b.code.split('\n').forEach((line, i) => {
      for (const part of line.replace(/#.*$/, '').split('&&')) {
        const argv = part.trim().split(/\s+/).filter((w) => w !== '');
        if (argv.length > 0) out.push({ where: `${b.file}:${b.line + 1 + i}`, argv });
      }
    });
  }
  return out;
}

describe('shell blocks in the README and docs/', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string; scripts: Record<string, string> };

  it('every block is tagged js, ts, sh or text (text: output and diagrams)', () => {
    const untagged = blocks.filter((b) => !['js', 'ts', 'sh', 'text'].includes(b.lang)).map((b) => `${b.file}:${b.line} ${JSON.stringify(b.lang)}`);
    expect(untagged).toEqual([]);
  });

  it('every npm command names a script the package has, and an install names this version', () => {
    const wrong: string[] = [];
    for (const { where, argv } of commands().filter((c) => c.argv[0] === 'npm')) {
      const [, verb, arg] = argv;
      if (verb === 'run') {
        if (arg === undefined || !(arg in pkg.scripts)) wrong.push(`${where}: no script ${arg}`);
      } else if (verb === 'start' || verb === 'test') {
        if (!(verb in pkg.scripts)) wrong.push(`${where}: no script ${verb}`);
      } else if (verb === 'install') {
        // `npm install` in a checkout, a placeholder for the repository's URL, or the tarball npm pack makes.
        const ok = arg === undefined || arg === '<git' || arg === `./sluice-${pkg.version}.tgz`;
        if (!ok) wrong.push(`${where}: npm install ${arg}`);
      } else {
        wrong.push(`${where}: npm ${verb} is not checked here`);
      }
    }
    expect(wrong).toEqual([]);
    expect(commands().filter((c) => c.argv[0] === 'npm').length).toBeGreaterThan(5);
  });

  it('every npx sluice command runs as shown and exits 0 (bench: its suites exist)', () => {
    const lines = commands().filter((c) => c.argv[0] === 'npx');
    expect(lines.length).toBeGreaterThanOrEqual(4);
    const others = commands().filter((c) => c.argv[0] !== 'npx' && c.argv[0] !== 'npm');
    expect(others.map((c) => c.where)).toEqual([]); // only npm and npx lines: each is checked
    for (const { where, argv } of lines) {
      expect(argv[1], where).toBe('sluice');
      const args = argv.slice(2);
      if (args[0] === 'bench') {
        // The benchmarks take minutes (CI runs bench:quick on its own): run.js is asked only
        // whether it knows each named suite.
        const suites = args.slice(1).filter((a) => !a.startsWith('--'));
        const run = readFileSync(join(root, 'bench/run.js'), 'utf8');
        for (const s of suites) expect(run, `${where}: suite ${s}`).toMatch(new RegExp(`^\\s+${s}[:,]`, 'm'));
        continue;
      }
      const r = spawnSync(process.execPath, ['dist/cli/main.js', ...args], { cwd: root, encoding: 'utf8', env: { ...process.env, CI: 'true' } });
      expect(r.status, `${where}: ${args.join(' ')}\n${r.stderr}`).toBe(0);
    }
  }, 120_000);
});
