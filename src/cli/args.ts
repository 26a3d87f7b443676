/**
 * Command-line parsing for `sluice`: options through `node:util` `parseArgs`, and the value
 * grammars shared by the subcommands (rates such as `100/s` or `1000000/d`, durations such as
 * `10ms`).
 *
 * Every function here throws `UsageError` on bad input, with a message that names the option and
 * the value; the entry point prints it with the subcommand's usage and exits with status 2.
 */
import { parseArgs } from 'node:util';
import type { Limit } from '../config/limit.js';
import { RateLimiter, type RateLimiterOptions } from '../rate/rate-limiter.js';
import { show, UsageError } from './usage.js';

/** The `parseArgs` option table of one subcommand. */
export type OptionSpec = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** What `parseOptions` returns: option values by name, and positional arguments. */
export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/**
 * Parses `argv` strictly against `spec` (plus `-h`/`--help`). Unknown options, missing values and
 * unexpected arguments throw `UsageError` with a short message (Node's own messages run past 80
 * columns).
 */
export function parseOptions(argv: readonly string[], spec: OptionSpec, allowPositionals = false): ParsedArgs {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: { ...spec, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals,
    });
    return { values: values as ParsedArgs['values'], positionals };
  } catch (error: unknown) {
    throw new UsageError(explainParseError(error));
  }
}

function explainParseError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as Error & { code?: unknown }).code;
  const quoted = /'([^']*)'/.exec(error.message)?.[1] ?? '';
  const option = quoted.split(' ')[0] ?? quoted;
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${show(option)}`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${show(option)}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (error.message.includes('does not take')) return `${option} does not take a value`;
      if (error.message.includes('ambiguous')) {
        return `${option} needs a value (write ${option}=-1 for a value starting with -)`;
      }
      return `${option} needs a value`;
    default:
      return error.message.split('\n')[0] ?? error.message;
  }
}

/** Milliseconds per duration unit. `m` is minutes, as in `5m`. */
const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1, s: 1_000, sec: 1_000, m: 60_000, min: 60_000, h: 3_600_000, hr: 3_600_000, d: 86_400_000, day: 86_400_000,
};

const DURATION = /^(\d+(?:\.\d+)?|\.\d+)?\s*(ms|sec|s|min|m|hr|h|day|d)$/;

/** Reads `10ms`, `2s`, `1.5s`, `5m`, `1h`, `1d` (and `0`) as milliseconds, or undefined. */
function durationMs(text: string, numberRequired: boolean): number | undefined {
  if (text.trim() === '0') return 0;
  const m = DURATION.exec(text.trim());
  if (m === null || (numberRequired && m[1] === undefined)) return undefined;
  const unit = UNIT_MS[m[2] as string] as number;
  return (m[1] === undefined ? 1 : Number(m[1])) * unit;
}

/**
 * Parses option `name`'s duration, e.g. `10ms`, `2s`, `5m`, `1h`, `1d`, within [minMs, maxMs]. Its
 * messages print the bounds in hours at most ("to 24 h", as the CLI tests pin). Pure.
 */
export function parseDuration(name: string, text: string, minMs: number, maxMs: number): number {
  const ms = durationMs(text, true);
  if (ms === undefined) throw new UsageError(`${name} must be a duration like 10ms, 2s, 5m or 1h, got ${show(text)}`);
  if (!(ms >= minMs && ms <= maxMs)) {
    throw new UsageError(`${name} must be from ${inUnits(minMs, HOURS_DOWN)} to ${inUnits(maxMs, HOURS_DOWN)}, got ${show(text)}`);
  }
  return ms;
}

/**
 * Parses option `name`'s rate, `PERMITS/PERIOD`: `100/s`, `20/min`, `1000/h`, `1000000/d` (or
 * `/day`), `5/100ms`. Pure.
 */
export function parseRate(name: string, text: string): Limit {
  const slash = text.indexOf('/');
  const permitsText = text.slice(0, slash).trim();
  const periodMs = slash < 0 ? undefined : durationMs(text.slice(slash + 1), false);
  const permits = /^(\d+(?:\.\d+)?|\.\d+)$/.test(permitsText) ? Number(permitsText) : NaN;
  if (periodMs === undefined || !(permits > 0) || !(periodMs > 0)) {
    throw new UsageError(`${name} must be a rate like 100/s, 20/min or 5/100ms, got ${show(text)}`);
  }
  return { permits, periodMs };
}

/** Parses option `name` as an integer in [min, max]. Pure. */
export function parseInteger(name: string, text: string, min: number, max: number): number {
  const n = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!(Number.isSafeInteger(n) && n >= min && n <= max)) {
    throw new UsageError(`${name} must be an integer from ${min} to ${max}, got ${show(text)}`);
  }
  return n;
}

/** Parses option `name` as a number of seconds in (0, maxSec], e.g. `2` or `0.5`. Pure. */
export function parseSeconds(name: string, text: string, maxSec: number): number {
  const n = /^(\d+(?:\.\d+)?|\.\d+)$/.test(text.trim()) ? Number(text) : NaN;
  if (!(n > 0 && n <= maxSec)) {
    throw new UsageError(`${name} must be a number of seconds above 0, at most ${maxSec}, got ${show(text)}`);
  }
  return n;
}

/**
 * Builds a throwaway limiter from `options`, so that a limit its algorithm cannot run is a usage
 * error naming `--limit` and `limitText`, not a stack trace.
 */
export function checkLimiter(options: RateLimiterOptions, limitText: string): void {
  try {
    void new RateLimiter({ ...options, maxKeys: 1 });
  } catch (error: unknown) {
    const why = error instanceof Error ? error.message.replace(/^options\.limit\./, 'its ').replace(/^options\.limit:\s*/, '') : String(error);
    throw new UsageError(`--limit ${show(limitText)} cannot run as ${options.algorithm ?? 'gcra'}: ${why}`);
  }
}

/** The string value of option `name`, or `fallback` when it was not given. */
export function stringOption(args: ParsedArgs, name: string, fallback: string): string {
  const v = args.values[name];
  return typeof v === 'string' ? v : fallback;
}

/** Display units from hours down, largest first, with their sizes in milliseconds. */
const HOURS_DOWN = [[3_600_000, 'h'], [60_000, 'min'], [1_000, 's']] as const;

/** Every display unit, largest first. */
const DAYS_DOWN = [[86_400_000, 'd'], ...HOURS_DOWN] as const;

/** Renders milliseconds in the largest of `units` that keeps it short, else in `ms`. */
function inUnits(ms: number, units: readonly (readonly [number, string])[]): string {
  for (const [size, unit] of units) {
    const tenths = (ms / size) * 10;
    if (ms >= size && Math.abs(tenths - Math.round(tenths)) < 1e-9) return `${Math.round(tenths) / 10} ${unit}`;
  }
  return `${+ms.toFixed(3)} ms`;
}

/** Renders milliseconds in the largest unit that keeps it short: `10 ms`, `1.5 s`, `5 min`, `1 d`. */
export function formatDuration(ms: number): string {
  return inUnits(ms, DAYS_DOWN);
}

/** Renders a limit as `100 per min`, `50 per s`, `1,000,000 per d` or `5 per 100 ms`. */
export function formatRate(limit: Limit): string {
  const period = formatDuration(limit.periodMs);
  return `${limit.permits.toLocaleString('en-US')} per ${period.startsWith('1 ') ? period.slice(2) : period}`;
}
