#!/usr/bin/env node
/**
 * The `sluice` command: `demo`, `stress`, `simulate`, `bench` and `help`. Exit status 0 on
 * success, 1 when a check fails (or the benchmarks are missing), 2 on a usage error.
 *
 * Thread-safety: main thread only.
 */
import { readFileSync } from 'node:fs';
import { show, UsageError } from './args.js';
import { BENCH_USAGE, runBench } from './bench.js';
import { DEMO_USAGE, runDemo } from './demo.js';
import { print, wrap } from './output.js';
import { runSimulate, SIMULATE_USAGE } from './simulate.js';
import { runStress, STRESS_USAGE } from './stress.js';

/** `sluice --help`. */
const MAIN_USAGE = `Usage: sluice <command> [options]

A rate limiter for worker threads whose per-key state lives in shared memory.

Commands:
  demo       worker threads share one limiter across three tenants
  stress     hammer one limiter from N threads; check nothing got past it
  simulate   replay one client against the four algorithms on a manual clock
  bench      run the benchmark suites (needs the source repository)

Run sluice help <command> (or sluice <command> --help) for the options of a
command, sluice --version for the version.`;

/** The installed package's version, from its package.json (two folders above dist/cli/). */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return String(pkg.version);
}

/** Each subcommand: how it runs and its usage text. */
const COMMANDS: Readonly<Record<string, { run: (argv: readonly string[]) => number | Promise<number>; usage: string }>> = {
  demo: { run: runDemo, usage: DEMO_USAGE },
  stress: { run: runStress, usage: STRESS_USAGE },
  simulate: { run: runSimulate, usage: SIMULATE_USAGE },
  bench: { run: runBench, usage: BENCH_USAGE },
};

/** Runs the command line `argv` (without `node` and the script); resolves with the exit status. */
async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '-h' || name === '--help') {
    if (rest.length > 0) return usageError(`sluice: ${name} takes no arguments (for a command's options: sluice <command> --help)`, MAIN_USAGE);
    print(MAIN_USAGE);
    return 0;
  }
  if (name === '-v' || name === '--version') {
    // Found: `sluice --version extra` printed the version and exited 0.
    if (rest.length > 0) return usageError(`sluice: ${name} takes no arguments, got ${show(rest[0] as string)}`, MAIN_USAGE);
    print(version());
    return 0;
  }
  if (name === 'help') {
    // `sluice help` as `sluice --help`; `sluice help <command>` as `sluice <command> --help`.
    const [topic, ...more] = rest;
    if (topic === undefined) {
      print(MAIN_USAGE);
      return 0;
    }
    const about = Object.hasOwn(COMMANDS, topic) ? COMMANDS[topic] : undefined;
    if (about === undefined) return usageError(`sluice help: unknown command ${show(topic)}`, MAIN_USAGE);
    if (more.length > 0) return usageError(`sluice help: unexpected argument ${show(more[0] as string)}`, MAIN_USAGE);
    print(about.usage);
    return 0;
  }
  const command = name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    const why = name === undefined ? 'a command is required' : `unknown command ${JSON.stringify(name.slice(0, 40))}`;
    return usageError(`sluice: ${why}`, MAIN_USAGE);
  }
  try {
    return await command.run(rest);
  } catch (error: unknown) {
    if (error instanceof UsageError) return usageError(`sluice ${name}: ${error.message}`, command.usage);
    const why = error instanceof Error ? error.message : String(error);
    process.stderr.write(`${wrap(`sluice ${name}: ${why}`, 80, '  ').join('\n')}\n`);
    return 1;
  }
}

function usageError(message: string, usage: string): number {
  process.stderr.write(`${wrap(message, 80, '  ').join('\n')}\n\n${usage}\n`);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
