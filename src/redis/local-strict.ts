import type { AlgorithmName } from '../algorithms/index.js';
import type { Limit } from '../config/limit.js';
import { validateLimit } from '../config/limit.js';
import { match, type CompiledRule, type CompiledRules, type PolicyRule } from '../policy/rules.js';
import { H_ON_FULL } from '../table/layout.js';

/**
 * The checks that the shared-memory limiter answering for onError 'local' is at least as strict
 * as the Redis limits it stands in for during an outage (docs/redis.md): both Redis limiters
 * refuse at construction, with a `RangeError` naming `options.local`, one that would admit more.
 */

/** `a` holds no more than `b`: for GCRA a rate and a burst no higher; for windows the same period, no more permits. */
export function asStrict(algorithm: AlgorithmName, a: Readonly<Required<Limit>>, b: Readonly<Required<Limit>>): boolean {
  if (algorithm !== 'gcra') return a.periodMs === b.periodMs && a.permits <= b.permits;
  return a.permits * b.periodMs <= b.permits * a.periodMs && a.burst <= b.burst;
}

/** A limit as the README writes it, for messages. */
export function limitText(l: Readonly<Required<Limit>>): string {
  return `${l.permits} per ${l.periodMs} ms (burst ${l.burst})`;
}

/**
 * Throws `RangeError` when the local limiter's table (`table`, the buffer of its handle) was made
 * with onFull 'allow': a full table lets every key it has no slot for through untracked, so during
 * an outage keys past the table's size would have no limit at all. Found: 20 of 20 admitted at 1
 * per hour.
 */
export function checkLocalTracksEveryKey(table: SharedArrayBuffer): void {
  // The word is written before the buffer is first shared (createTable) and never changes: a
  // plain read sees it.
  if (new Int32Array(table, 0, H_ON_FULL + 1)[H_ON_FULL] === 1) {
    throw new RangeError("options.local was made with onFull 'allow': when its table is full it admits keys untracked, " +
      "so during an outage it would admit more than the Redis limits (give it onFull 'deny', the default, and enough maxKeys)");
  }
}

/**
 * Throws `RangeError` unless the `local` limiter (onError 'local') enforces at least what the
 * Redis limits do: its answers stand in for Redis's during an outage. Found: a 99/s local limiter
 * in front of a 1/s limit admitted 20 of 20 while Redis was down.
 */
export function checkLocalAsStrict(
  local: { algorithm: AlgorithmName; limits: readonly Readonly<Required<Limit>>[]; globalLimit: Readonly<Required<Limit>> | null },
  algorithm: AlgorithmName, limits: readonly Readonly<Required<Limit>>[], globalLimit: Readonly<Required<Limit>> | null,
): void {
  if (local.algorithm !== algorithm) {
    throw new RangeError(`options.local runs '${local.algorithm}', the Redis limits '${algorithm}': it must run the same algorithm to stand in for them`);
  }
  for (const [i, l] of limits.entries()) {
    if (!local.limits.some((m) => asStrict(algorithm, m, l))) {
      throw new RangeError(`options.local has no limit as strict as options.limit${limits.length > 1 ? `[${i}]` : ''} (${limitText(l)}): ` +
        `during an outage it would admit more (its limits: ${local.limits.map(limitText).join(', ')})`);
    }
  }
  if (globalLimit !== null && (local.globalLimit === null || !asStrict(algorithm, local.globalLimit, globalLimit))) {
    throw new RangeError(`options.local has no global limit as strict as options.globalLimit (${limitText(globalLimit)})`);
  }
}

/** A rule's limits, normalized (burst defaulted). */
function ruleLimits(rule: PolicyRule): Required<Limit>[] {
  const list = (Array.isArray(rule.limit) ? rule.limit : [rule.limit]) as Limit[];
  return list.map((l) => validateLimit(l));
}

/** A rule as its user and api name it, for messages. */
export function ruleText(rule: PolicyRule): string {
  if (rule.user === undefined && rule.api === undefined) return 'default rule';
  return `rule for ${[rule.user === undefined ? '' : `user ${JSON.stringify(rule.user)}`, rule.api === undefined ? '' : `api ${JSON.stringify(rule.api)}`]
    .filter((s) => s !== '').join(', ')}`;
}

/**
 * Why the local rule `local` is looser than the Redis rule `rule` (for the same pair), or null
 * when it holds at least what `rule` does: the same algorithm, and for each of `rule`'s limits
 * one of its own as strict.
 */
export function ruleLooseness(local: PolicyRule, rule: PolicyRule): string | null {
  const algorithm = rule.algorithm ?? 'gcra';
  const localAlgorithm = local.algorithm ?? 'gcra';
  if (localAlgorithm !== algorithm) return `its ${ruleText(local)} runs '${localAlgorithm}', the Redis ${ruleText(rule)} '${algorithm}'`;
  const mine = ruleLimits(local);
  for (const l of ruleLimits(rule)) {
    if (!mine.some((m) => asStrict(algorithm, m, l))) {
      return `its ${ruleText(local)} has no limit as strict as ${limitText(l)} of the Redis ${ruleText(rule)} (its limits: ${mine.map(limitText).join(', ')})`;
    }
  }
  return null;
}

/** A name that is none of `names` (rules name no empty user or api, but any other string is possible). */
function otherThan(names: ReadonlySet<string>): string {
  for (let i = 0; ; i++) {
    const name = `\u0000other${i}`;
    if (!names.has(name)) return name;
  }
}

/**
 * Throws `RangeError` (naming `options.local`, the pair and the looser rule) unless, for every
 * (user, api) pair, the rule `local` gives the pair is at least as strict as the one `rules` gives
 * it. A rule matches by user and api only (rules.ts `match`): every user no rule of either set
 * names matches as any one of them does, and so for apis, so the pairs of the users and apis the
 * rules name, and one other of each, cover every pair.
 */
export function checkLocalRulesAsStrict(local: CompiledRules, rules: CompiledRules): void {
  const users = new Set<string>();
  const apis = new Set<string>();
  for (const set of [local, rules]) {
    for (const u of set.byUser.keys()) users.add(u);
    for (const a of set.byApi.keys()) apis.add(a);
    for (const [u, byApi] of set.byPair) {
      users.add(u);
      for (const a of byApi.keys()) apis.add(a);
    }
  }
  const anyUser = otherThan(users);
  const anyApi = otherThan(apis);
  const seen = new Map<CompiledRule, Set<CompiledRule>>();
  for (const u of [anyUser, ...users]) {
    for (const a of [anyApi, ...apis]) {
      const mine = match(local, u, a);
      const theirs = match(rules, u, a);
      let checked = seen.get(mine);
      if (checked === undefined) seen.set(mine, (checked = new Set()));
      if (checked.has(theirs)) continue;
      checked.add(theirs);
      const why = ruleLooseness(mine.rule, theirs.rule);
      if (why !== null) {
        const pair = [u === anyUser ? 'any other user' : `user ${JSON.stringify(u)}`, a === anyApi ? 'any other api' : `api ${JSON.stringify(a)}`].join(', ');
        throw new RangeError(`options.local is looser than the Redis rules for ${pair}: ${why}; during an outage it would admit more`);
      }
    }
  }
}
