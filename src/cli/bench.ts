/**
 * `sluice bench`: runs the benchmark suites in the package's `bench/` folder (`node bench/run.js`),
 * passing `--quick` and suite names through. The folder ships with the source repository only.
 *
 * Thread-safety: main thread only; the suites run in a child process.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseOptions } from './args.js';
import { print, wrap } from './output.js';
import { BENCH_USAGE } from './usage.js';

/** The package root: `dist/cli/` is two levels below it. */
const PACKAGE_ROOT = new URL('../../', import.meta.url);

/** Runs `sluice bench`; resolves with the exit status of the suites. */
export async function runBench(argv: readonly string[]): Promise<number> {
  const args = parseOptions(argv, { quick: { type: 'boolean' } }, true);
  if (args.values.help === true) {
    print(BENCH_USAGE);
    return 0;
  }
  const runner = fileURLToPath(new URL('bench/run.js', PACKAGE_ROOT));
  if (!existsSync(runner)) {
    process.stderr.write(wrap(
      `sluice bench: no benchmarks here: ${runner} does not exist. They ship with the source ` +
        'repository, not with the installed package: clone it, npm install, then run sluice bench there.',
    ).map((l) => `${l}\n`).join(''));
    return 1;
  }
  const passed = [...(args.values.quick === true ? ['--quick'] : []), ...args.positionals];
  const child = spawn(process.execPath, [runner, ...passed], { cwd: fileURLToPath(PACKAGE_ROOT), stdio: 'inherit' });
  return new Promise<number>((resolve) => {
    child.once('error', (error) => {
      process.stderr.write(`sluice bench: could not start node: ${error.message}\n`);
      resolve(1);
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128 + signalNumber(signal))));
  });
}

function signalNumber(signal: NodeJS.Signals): number {
  return signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1;
}
