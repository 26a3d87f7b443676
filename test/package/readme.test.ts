import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url);

describe('README', () => {
  it('shows examples/quick-start.js verbatim', () => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    const example = readFileSync(new URL('examples/quick-start.js', root), 'utf8');
    expect(readme).toContain(`\`\`\`js\n${example}\`\`\``);
  });

  it.each(['http-server', 'piscina/worker', 'piscina/main', 'cluster-redis'])('shows examples/%s.js verbatim', (name) => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    const example = readFileSync(new URL(`examples/${name}.js`, root), 'utf8');
    expect(readme).toContain(`\`\`\`js\n${example}\`\`\``);
  });

  it.each(['algorithms', 'policy', 'waiting', 'concurrency'])('shows examples/%s.js verbatim, and it runs', (name) => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    const example = readFileSync(new URL(`examples/${name}.js`, root), 'utf8');
    expect(readme).toContain(`\`\`\`js\n${example}\`\`\``);
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

  it('shows what sluice simulate prints', () => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    const out = execFileSync(process.execPath, ['dist/cli/main.js', 'simulate'], { cwd: root, encoding: 'utf8' });
    const table = out.slice(out.indexOf('algorithm ')).trimEnd();
    expect(table.split('\n')).toHaveLength(6);
    expect(readme).toContain(table);
  });

  it('npm start demo runs and reports no violation', () => {
    const out = execFileSync(process.execPath, ['dist/cli/main.js', 'demo'], { cwd: root, encoding: 'utf8' });
    expect(out).toMatch(/ok: the workers never exceeded the shared limit/);
  });
});
