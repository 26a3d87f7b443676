import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docFiles } from '../helpers/doc-blocks.js';

const root = new URL('../../', import.meta.url);
/** The guide that shows each example. */
const GUIDE: Record<string, string> = {
  'http-server': 'docs/http.md', 'piscina/worker': 'docs/piscina.md', 'piscina/main': 'docs/piscina.md', 'cluster-redis': 'docs/redis.md',
  algorithms: 'docs/algorithms.md', policy: 'docs/policies.md', waiting: 'docs/waiting.md', concurrency: 'docs/concurrency.md',
};
const read = (file: string): string => readFileSync(new URL(file, root), 'utf8');

describe('README and guides', () => {
  it('the README stays a front door: at most 250 lines, linking every guide under docs/', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
    const guides = docFiles(fileURLToPath(root)).filter((f) => f.startsWith('docs/'));
    const unlinked = guides.filter((f) => !readme.includes(`](${f}`));
    expect(unlinked).toEqual([]);
  });

  it('every relative link in the README and docs/ reaches a file, and every #anchor a heading', () => {
    const broken: string[] = [];
    for (const file of docFiles(fileURLToPath(root))) {
      const text = read(file);
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] as string;
        if (/^[a-z]+:/.test(target)) continue; // https: and the like
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const into = path === '' ? file : new URL(path, new URL(file, root)).pathname.slice(fileURLToPath(root).length);
        if (into.endsWith('/')) {
          if (!existsSync(new URL(into, root))) broken.push(`${file}: ${target} (no such folder)`);
          continue;
        }
        let body: string;
        try {
          body = read(into);
        } catch {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (anchor !== undefined && !anchorsOf(body).has(anchor)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('shows examples/quick-start.js verbatim', () => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    const example = readFileSync(new URL('examples/quick-start.js', root), 'utf8');
    expect(readme).toContain(`\`\`\`js\n${example}\`\`\``);
  });

  it.each(['http-server', 'piscina/worker', 'piscina/main', 'cluster-redis'])('its guide shows examples/%s.js verbatim', (name) => {
    const example = read(`examples/${name}.js`);
    expect(read(GUIDE[name] as string)).toContain(`\`\`\`js\n${example}\`\`\``);
  });

  it.each(['algorithms', 'policy', 'waiting', 'concurrency'])('its guide shows examples/%s.js verbatim, and it runs', (name) => {
    const example = read(`examples/${name}.js`);
    expect(read(GUIDE[name] as string)).toContain(`\`\`\`js\n${example}\`\`\``);
    const out = execFileSync(process.execPath, [`examples/${name}.js`], { cwd: root, encoding: 'utf8' });
    expect(out.length).toBeGreaterThan(0);
  });

  it('examples print what the README says', () => {
    const run = (name: string) => execFileSync(process.execPath, [`examples/${name}.js`], { cwd: root, encoding: 'utf8' });
    expect(run('algorithms')).toMatch(/gcra +599 allowed[\s\S]*fixed-window +600[\s\S]*sliding-window 546[\s\S]*sliding-log +500/);
    expect(run('waiting')).toBe('reserved; act in 200 ms\ntoo long: 400 ms\ncancelled: true\nadmitted at 200 ms\n');
    expect(run('policy')).toBe('4\n19\n49\n');
    expect(run('concurrency')).toBe('false limited 30000\n1\n2\n');
  });

  it('quick start runs: the main thread and two workers share one limit', () => {
    const out = execFileSync(process.execPath, ['examples/quick-start.js'], { cwd: root, encoding: 'utf8' });
    expect(out).toMatch(/main: \{[\s\S]*allowed: true,[\s\S]*remaining: 6,/);
    const workers = [...out.matchAll(/worker \d: (\d) of 5 allowed/g)].map((m) => Number(m[1]));
    expect(workers).toHaveLength(2);
    const sum = workers.reduce((a, b) => a + b, 0);
    expect(sum).toBeGreaterThanOrEqual(6); // the 6 left, plus what refilled while workers started
    const left = Number(/main: user:42 has (\d+) left/.exec(out)?.[1]);
    expect(left).toBeGreaterThanOrEqual(0);
  });

  it('docs/cli.md shows what sluice simulate prints', () => {
    const readme = read('docs/cli.md');
    const out = execFileSync(process.execPath, ['dist/cli/main.js', 'simulate'], { cwd: root, encoding: 'utf8' });
    const table = out.slice(out.indexOf('algorithm ')).trimEnd();
    expect(table.split('\n')).toHaveLength(6);
    expect(readme).toContain(table);
  });

  // docs-code.test.ts runs `sluice demo` as docs/cli.md shows it; its exit status is 0 only when
  // no tenant got past the limit.
  it('npm start builds and runs the demo', () => {
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe('npm run build --silent && node dist/cli/main.js demo');
    expect(read('docs/cli.md')).toMatch(/^npx sluice demo +# what npm start runs/m);
  });
});

/** GitHub's anchors for the headings of a Markdown text (lower case, punctuation dropped, spaces as dashes). */
function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  let fence = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence;
    const h = fence ? null : /^#{1,6} (.*)$/.exec(line);
    if (h === null) continue;
    out.add((h[1] as string).toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'));
  }
  return out;
}
