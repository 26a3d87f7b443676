import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatDuration, formatRate, parseDuration, parseRate } from '../../src/cli/args.js';
import { UsageError } from '../../src/cli/usage.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const main = 'dist/cli/main.js';

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node dist/cli/main.js ...args` and checks that no line of its output passes 80 columns. */
function sluice(...args: string[]): Run {
  // 45 s: a stress or demo run starts worker threads, which a busy machine starts slowly (the
  // test's own limit is 60 s).
  const r = spawnSync(process.execPath, [main, ...args], { cwd: root, encoding: 'utf8', timeout: 45_000 });
  expect(r.error).toBeUndefined();
  for (const line of `${r.stdout}\n${r.stderr}`.split('\n')) expect(line.length, line).toBeLessThanOrEqual(80);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sluice --version', () => {
  it.each(['--version', '-v'])("%s prints package.json's version and exits 0", (flag) => {
    const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { version: string };
    expect(sluice(flag)).toEqual({ status: 0, stdout: `${version}\n`, stderr: '' });
  });
});

describe('sluice --version and --help take nothing after them', () => {
  // Found: `sluice --version extra` printed the version and exited 0.
  it.each([['--version', 'extra'], ['-v', 'x'], ['--help', 'demo'], ['-h', 'x']])('%s %s is a usage error', (flag, extra) => {
    const r = sluice(flag, extra);
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toMatch(new RegExp(`^sluice: ${flag} takes no arguments`));
    expect(r.stderr).toMatch(/\n\nUsage: sluice <command>/);
  });
});

describe('sluice help', () => {
  // Found: `sluice help` was an unknown command.
  it('prints what --help prints', () => {
    expect(sluice('help')).toEqual(sluice('--help'));
  });

  it.each(['demo', 'stress', 'simulate', 'bench'])('help %s prints what that command prints for --help', (command) => {
    const r = sluice('help', command);
    expect(r).toEqual(sluice(command, '--help'));
    expect(r.stdout).toMatch(new RegExp(`^Usage: sluice ${command} `));
  });

  it.each([[['help', 'frobnicate'], /^sluice help: unknown command "frobnicate"/], [['help', 'demo', 'x'], /^sluice help: unexpected argument "x"/]])('%j is a usage error', (args, message) => {
    const r = sluice(...(args as string[]));
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toMatch(message as RegExp);
  });
});

describe('sluice --help', () => {
  it('is the first line of the built entry: #!/usr/bin/env node', () => {
    expect(readFileSync(`${root}${main}`, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
  });

  it.each(['--help', '-h'])('%s lists the commands on stdout and exits 0', (flag) => {
    const r = sluice(flag);
    expect(r).toMatchObject({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/^Usage: sluice <command> \[options\]/);
    for (const command of ['demo', 'stress', 'simulate', 'bench']) expect(r.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
  });

  it.each(['demo', 'stress', 'simulate', 'bench'])('%s --help and -h print its usage and exit 0', (command) => {
    for (const flag of ['--help', '-h']) {
      const r = sluice(command, flag);
      expect(r).toMatchObject({ status: 0, stderr: '' });
      expect(r.stdout).toMatch(new RegExp(`^Usage: sluice ${command} `));
      expect(r.stdout).toMatch(/-h, --help/);
    }
  });
});

describe('usage errors exit 2 with the usage on stderr', () => {
  it('no command', () => {
    const r = sluice();
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toMatch(/^sluice: a command is required\n\nUsage: sluice <command>/);
  });

  it.each(['frobnicate', 'toString'])('an unknown command: %s', (name) => {
    const r = sluice(name, '--help');
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toMatch(new RegExp(`^sluice: unknown command "${name}"\n\nUsage: sluice <command>`));
  });

  it.each([
    [['simulate', '--bogus'], /^sluice simulate: unknown option "--bogus"/],
    [['stress', '-z'], /^sluice stress: unknown option "-z"/],
    [['simulate', 'extra'], /^sluice simulate: unexpected argument "extra"/],
    [['stress', '--workers'], /^sluice stress: --workers needs a value/],
    [['stress', '--seconds', '-1'], /^sluice stress: --seconds needs a value \(write --seconds=-1/],
    [['bench', '--quick=yes'], /^sluice bench: --quick does not take a value/],
    [['stress', '--workers', '0'], /^sluice stress: --workers must be an integer from 1 to 64, got "0"/],
    [['stress', '--seconds=-1'], /^sluice stress: --seconds must be a number of seconds above 0, at most 3600, got "-1"/],
    [['stress', '--algorithm', 'leaky'], /^sluice stress: --algorithm must be one of gcra, fixed-window, sliding-window, sliding-log, got "leaky"/],
    [['stress', '--algorithm', 'fixed-window', '--burst', '5'], /^sluice stress: --burst applies only to --algorithm gcra/],
    [['stress', '--keys', '1e3'], /^sluice stress: --keys must be an integer from 1 to 10000, got "1e3"/],
    [['demo', '--seconds', 'abc'], /^sluice demo: --seconds must be a number of seconds above 0, at most 3600, got "abc"/],
    [['demo', '--limit', '100000000000/ms'], /^sluice demo: --limit "100000000000\/ms" cannot run as gcra: .*the finest interval is 0\.1 ps/],
    [['demo', '--limit', '50'], /^sluice demo: --limit must be a rate like 100\/s, 20\/min or 5\/100ms, got "50"/],
    [['simulate', '--limit', 'fast'], /^sluice simulate: --limit must be a rate like 100\/s, 20\/min or 5\/100ms, got "fast"/],
    [['simulate', '--limit', '2.5/s'], /^sluice simulate: --limit "2.5\/s" cannot run as fixed-window: its permits must be an integer/],
    [['simulate', '--every', 'soon'], /^sluice simulate: --every must be a duration like 10ms, 2s, 5m or 1h, got "soon"/],
    [['simulate', '--every', '0'], /^sluice simulate: --every must be from 0.001 ms to 24 h, got "0"/],
    [['simulate', '--every', '1ms', '--for', '1h'], /^sluice simulate: --for \/ --every makes 3,600,000 tries; at most 2,000,000/],
    [['simulate', '--limit', '5000/s', '--every', '1ms', '--for', '30m'], /^sluice simulate: 1,800,000 tries at 5,000 permits would take minutes/],
    [['simulate', '--start', `${'9'.repeat(200)}s`], /^sluice simulate: --start must be from 0 ms to 8784 h, got "9{21}\.\.\."/],
  ] as const)('%j', (args, message) => {
    const command = args[0];
    const r = sluice(...args);
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr.replace(/\n {2}/g, ' ')).toMatch(message);
    expect(r.stderr).toContain(`\n\nUsage: sluice ${command} `);
  });
});

describe('sluice simulate', () => {
  it('with the defaults prints the published comparison: 100 per minute, a try every 10 ms', () => {
    const r = sluice('simulate');
    expect(r).toMatchObject({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/^algorithm +allowed +tried +most in any 1 min +of limit$/m);
    const rows = [...r.stdout.matchAll(/^(\S+) +([\d,]+) +([\d,]+) +([\d,]+) +([\d.]+)x$/gm)].map((m) => [m[1], m[2], m[3], m[4]]);
    expect(rows).toEqual([
      ['fixed-window', '600', '30,000', '200'],
      ['sliding-log', '500', '30,000', '100'],
      ['sliding-window', '546', '30,000', '149'],
      ['gcra', '599', '30,000', '199'],
    ]);
  });

  it('takes the window as the limit\'s period; the sliding log never passes its permits in one', () => {
    const r = sluice('simulate', '--limit', '10/s', '--every', '50ms', '--for', '10s', '--start', '500ms', '--burst', '4');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/GCRA has burst 4/);
    expect(r.stdout).toMatch(/most in any 1 s/);
    expect(r.stdout).toMatch(/^sliding-log +100 +200 +10 +1\.00x$/m);
  });
});

describe('sluice stress', () => {
  it('--workers 2 --seconds 0.5: workers on the real clock never get past the limit; exit 0', () => {
    const r = sluice('stress', '--workers', '2', '--seconds', '0.5');
    expect(r).toMatchObject({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/^Ran 0\.\d{3} s\. .*no key may have more than\nburst 100 \+ 100 per s x 0\.\d{3} s = (\d+)\.$/m);
    const row = /^key:0 +([\d,]+) +([\d,]+) +([\d,]+) +ok$/m.exec(r.stdout);
    expect(row).not.toBeNull();
    const [tried, allowed, most] = (row as RegExpExecArray).slice(1).map((s) => Number(s.replace(/,/g, '')));
    expect(allowed).toBeGreaterThanOrEqual(100); // the burst, at least
    expect(allowed).toBeLessThanOrEqual(most as number);
    expect(tried).toBeGreaterThan(allowed as number);
    expect(r.stdout).toMatch(/^0 +[\d,]+ +[\d,]+ +[\d,]+\n1 +[\d,]+ +[\d,]+ +[\d,]+\nall /m); // one row per worker
    expect(r.stdout).toMatch(/\nok: no key was admitted more than gcra permits\n$/);
  });

  // The 64-bit path on the real clock: a million a day with a small burst (interval 86.4 ms: the
  // burst is spent at once, then a permit every 86.4 ms), and 7e9 per second (interval 0.14 ns, 0.1 ps ticks).
  it.each([['1000000/d', '10'], ['7000000000/s', '1000']])('--limit %s --burst %s: the 64-bit path never gets past the limit', (limit, burst) => {
    const r = sluice('stress', '--workers', '2', '--seconds', '0.5', '--limit', limit, '--burst', burst, '--keys', '2');
    expect(r).toMatchObject({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/\nok: no key was admitted more than gcra permits\n$/);
  });

  // Window algorithms on the real clock: the regression test for a decision whose clock reading
  // predates a newer window moving that window back (and so admitting a second window's worth).
  it.each(['fixed-window', 'sliding-window', 'sliding-log'])('%s: 2 workers, 3 keys, windows of 100 ms, never past the bound', (algorithm) => {
    const r = sluice('stress', '--workers', '2', '--seconds', '0.5', '--limit', '50/100ms', '--algorithm', algorithm, '--keys', '3');
    expect(r).toMatchObject({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(new RegExp(`\\nok: no key was admitted more than ${algorithm} permits\\n$`));
  });
});

describe('sluice demo', () => {
  it('--seconds 0.5: three tenants on four workers, then the summary; exit 0', () => {
    const r = sluice('demo', '--seconds', '0.5');
    expect(r).toMatchObject({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/^sluice demo: 4 worker threads share one limiter/);
    expect(r.stdout).toMatch(/^worker +acme +globex +initech$/m);
    expect(r.stdout).toMatch(/^acme +[\d,]+ +[\d,]+ +\d+ +ok: held to the limit$/m);
    expect(r.stdout).toMatch(/^tenant +tried +allowed +at most +verdict$/m);
    expect(r.stdout).toMatch(/^initech +\d+ +\d+ +\d+ +ok: /m);
    expect(r.stdout).toMatch(/\nok: the workers never exceeded the shared limit\n$/);
  });
});

describe('rates and durations', () => {
  it.each([
    ['100/s', 100, 1_000], ['20/min', 20, 60_000], ['1000/h', 1000, 3_600_000], ['5/100ms', 5, 100],
    ['2.5/s', 2.5, 1_000], ['7/2m', 7, 120_000], ['1/1.5s', 1, 1_500],
  ] as const)('%s is %d per %d ms', (text, permits, periodMs) => {
    expect(parseRate('--limit', text)).toEqual({ permits, periodMs });
  });

  it.each(['100', '/s', '0/s', '-1/s', '10/0s', '10/fortnight', '1e3/s', '10/s/s'])('%j is not a rate', (text) => {
    expect(() => parseRate('--limit', text)).toThrow(UsageError);
  });

  it.each([['10ms', 10], ['2s', 2_000], ['5m', 300_000], ['1h', 3_600_000], ['1.5s', 1_500], ['0', 0]] as const)('%s is %d ms', (text, ms) => {
    expect(parseDuration('--every', text, 0, 1e10)).toBe(ms);
  });

  it.each(['10', 's', '-1s', '1 week', '1.s'])('%j is not a duration', (text) => {
    expect(() => parseDuration('--every', text, 0, 1e10)).toThrow(/--every must be a duration like 10ms, 2s, 5m or 1h/);
  });

  it('renders in the largest unit that stays short', () => {
    expect([10, 1_500, 30_000, 60_000, 90_000, 61_000, 3_600_000, 0.5].map(formatDuration))
      .toEqual(['10 ms', '1.5 s', '30 s', '1 min', '1.5 min', '61 s', '1 h', '0.5 ms']);
    expect(formatRate({ permits: 100, periodMs: 60_000 })).toBe('100 per min');
    expect(formatRate({ permits: 5, periodMs: 100 })).toBe('5 per 100 ms');
  });
});
