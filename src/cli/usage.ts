/**
 * What the `sluice` command line may be: each command's usage text, and the error a command line
 * that breaks it throws. Kept apart from the commands, which load the library, so that `--help`,
 * `--version` and a usage error load none of it.
 *
 * Thread-safety: main thread only.
 */

/** A mistake on the command line: printed with the subcommand's usage, exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Quotes a command-line value for a message, cut short so the message fits on a line. */
export function show(value: string): string {
  return JSON.stringify(value.length > 24 ? `${value.slice(0, 21)}...` : value);
}

/** `sluice --help`. */
export const MAIN_USAGE = `Usage: sluice <command> [options]

A rate limiter for worker threads whose per-key state lives in shared memory.

Commands:
  demo       worker threads share one limiter across three tenants
  stress     hammer one limiter from N threads; check nothing got past it
  simulate   replay one client against the four algorithms on a manual clock
  bench      run the benchmark suites (needs the source repository)

Run sluice help <command> (or sluice <command> --help) for the options of a
command, sluice --version for the version.`;

/** `sluice demo --help`. */
export const DEMO_USAGE = `Usage: sluice demo [options]

A few worker threads share one limiter. Every worker serves three tenants:
acme sends as fast as it can, globex 40 and initech 10 requests per second in
all. Each tenant has its own limit in shared memory: acme is held to it, the
others get every request through. Ends with what each worker and tenant got.

Options:
  --workers N      worker threads (default 4, at most 64)
  --seconds T      how long to run, in seconds (default 2)
  --limit RATE     each tenant's limit: 50/s, 20/min, 5/100ms (default 50/s)
  -h, --help       show this help`;

/** `sluice stress --help`. */
export const STRESS_USAGE = `Usage: sluice stress [options]

Hammers one limiter from N worker threads for T seconds on the real clock,
counting every admission in shared memory, then checks each key against the
most its algorithm can admit in the time that passed. Exits 0 when no key got
more, 1 when one did.

Options:
  --workers N      worker threads (default 4, at most 64)
  --seconds T      how long to run, in seconds (default 2)
  --limit RATE     the limit of each key: 100/s, 20/min, 1000/h, 5/100ms
                   (default 100/s)
  --burst B        GCRA bucket capacity (default: the limit's permits)
  --algorithm A    gcra, fixed-window, sliding-window or sliding-log
                   (default gcra)
  --keys K         keys every worker tries in turn (default 1)
  -h, --help       show this help

Example: sluice stress --workers 8 --seconds 10 --algorithm sliding-log`;

/** `sluice simulate --help`. */
export const SIMULATE_USAGE = `Usage: sluice simulate [options]

Replays one client against each of the four algorithms on a manual clock: the
client tries once every EVERY for FOR, starting at clock time START. Prints
how many tries each algorithm allowed, and the most it allowed in any span as
long as the limit's period: what a client can get past it at worst.

Options:
  --limit RATE     100/s, 20/min, 1000/h, 5/100ms (default 100/min)
  --every DUR      time between tries: 10ms, 2s, 5m, 1h (default 10ms)
  --for DUR        how long the client keeps trying (default 5m)
  --start DUR      clock time of the first try (default 30s); windows start at
                   multiples of the period, so 30s starts halfway into a minute
  --burst B        GCRA bucket capacity (default: the limit's permits)
  -h, --help       show this help`;

/** `sluice bench --help`. */
export const BENCH_USAGE = `Usage: sluice bench [--quick] [suite ...]

Runs the benchmarks in the package's bench/ folder (node bench/run.js). With
no suite and no --quick, every suite runs in full (minutes) and rewrites
bench/RESULTS.md; otherwise the results are printed only. Needs the source
repository, built (npm run build): the installed package has no bench/.

Options:
  --quick          a short smoke run of each suite
  -h, --help       show this help

Suites: core, peers, contention, algorithms, race, scaling, width.`;
