#!/usr/bin/env node
/**
 * The `sluice` command: `demo`, `stress`, `simulate`, `bench` and `help`. Exit status 0 on
 * success, 1 when a check fails (or the benchmarks are missing), 2 on a usage error.
 *
 * Thread-safety: main thread only.
 */
import { readFileSync } from 'node:fs';
import { print, wrap } from './output.js';
import { BENCH_USAGE, DEMO_USAGE, MAIN_USAGE, show, SIMULATE_USAGE, STRESS_USAGE, UsageError } from './usage.js';

/** The installed package's version, from its package.json (two folders above dist/cli/). */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return String(pkg.version);
}

/**
 * Each subcommand: its usage text, and how to load its code. A command loads the library only
 * when it runs, so that `--help`, `--version` and usage errors start quickly.
 */
const COMMANDS: Readonly<Record<string, { load: () => Promise<(argv: readonly string[]) => number | Promise<number>>; usage: string }>> = {
  demo: { load: async () => (await import('./demo.js')).runDemo, usage: DEMO_USAGE },
  stress: { load: async () => (await import('./stress.js')).runStress, usage: STRESS_USAGE },
  simulate: { load: async () => (await import('./simulate.js')).runSimulate, usage: SIMULATE_USAGE },
  bench: { load: async () => (await import('./bench.js')).runBench, usage: BENCH_USAGE },
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
    const run = await command.load();
    return await run(rest);
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
