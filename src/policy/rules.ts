import { checkAlgorithm, type AlgorithmName } from '../algorithms/index.js';
import { checkCost, checkWellFormed, describe } from '../config/check.js';
import { gcraParams, wideTickHolding, WIDE_TICKS_PS } from '../math/gcra.js';
import type { Limit } from '../config/limit.js';
import { compileConfig } from '../rate/limiter-config.js';
import type { LimitGroup } from '../rate/locked-engine.js';
import { MAX_LIMITS } from '../table/layout.js';
import { checkNames, namesOf } from '../config/option-names.js';

/**
 * Policy rules as data: which limits apply to a (user, api) pair, and their validation and
 * compilation. A rule with neither `user` nor `api` is the default; the most specific rule wins:
 * (user, api), then api, then user, then the default.
 */
export interface PolicyRule {
  /** The user this rule is for; omitted: any user. */
  user?: string;
  /** The API this rule is for; omitted: any API. */
  api?: string;
  /** How the limits count; default `'gcra'`. */
  algorithm?: AlgorithmName;
  /** One limit, or several that must all allow. */
  limit: Limit | readonly Limit[];
}

/** A rule, checked and compiled for this thread. */
export interface CompiledRule {
  readonly rule: PolicyRule;
  readonly limits: LimitGroup;
  /** Identifies the layout and meaning of this rule's state (see `shapeOf`). */
  readonly shape: number;
  /** For GCRA rules: each limit's tick in ps, to carry a key's debt over a rule change. */
  readonly tickPs: readonly number[] | null;
  /** For GCRA rules: each limit's tick as an index in WIDE_TICKS_PS (as its state records it). */
  readonly tickIndex: readonly number[];
  /**
   * For fixed and sliding window rules of a PolicyLimiter made with `maxBlockMs`: the pair's
   * state ends with a block word (BlockUntil, a limit of its own, last), which `block` raises.
   */
  readonly blockWord: boolean;
}

/** Rules ready for matching. */
export interface CompiledRules {
  readonly fallback: CompiledRule;
  readonly byUser: Map<string, CompiledRule>;
  readonly byApi: Map<string, CompiledRule>;
  readonly byPair: Map<string, Map<string, CompiledRule>>;
  /** State words the largest rule needs (plus one for the shape word). */
  readonly stateWords: number;
  /** Every compiled rule by shape, to judge idleness of keys under any current rule. */
  readonly byShape: Map<number, CompiledRule[]>;
}

/** How error messages name rule `i`: `rules[i] (user "x", api "y")`. */
export function label(rule: unknown, i: number): string {
  const r = (rule ?? {}) as Partial<PolicyRule>;
  const parts = [];
  if (typeof r.user === 'string') parts.push(`user ${JSON.stringify(r.user)}`);
  if (typeof r.api === 'string') parts.push(`api ${JSON.stringify(r.api)}`);
  return `rules[${i}]${parts.length ? ` (${parts.join(', ')})` : ' (default)'}`;
}

/** A 31-bit FNV-1a hash of a string, for shapes of window and log rules. */
function hash31(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 1) | 0;
}

/**
 * The shape of a rule's state. GCRA: [1][limit count, at bit 24]: every limit keeps a 64-bit state
 * of four words that records its own tick, so a key carries its debt to any GCRA rule with as
 * many limits. Others: [0][hash of algorithm and limits]: any change means the key starts fresh
 * under the new rule.
 */
function shapeOf(
  algorithm: AlgorithmName, limits: Required<Limit>[], blockWord: boolean, ticksPs: readonly number[] | null,
): { shape: number; tickPs: number[] | null } {
  if (algorithm === 'gcra') {
    return { shape: (1 << 30) | (limits.length << 24), tickPs: limits.map((l, i) => ticksPs?.[i] ?? gcraParams(l, 'limit', 64).tickPs) };
  }
  // A state with a block word is another layout than one without (never read as each other).
  const text = JSON.stringify(blockWord ? [algorithm, limits, 'block'] : [algorithm, limits]);
  return { shape: (hash31(text) & 0x3fffffff) || 1, tickPs: null }; // never 0: NO_SHAPE
}

/** Whether a rule of `algorithm` keeps a block word when the limiter was made with `maxBlockMs` (a sliding log holds stamps). */
export function blockable(algorithm: AlgorithmName): boolean {
  return algorithm === 'fixed-window' || algorithm === 'sliding-window';
}

const RULE_FIELDS = namesOf<PolicyRule>()(['user', 'api', 'algorithm', 'limit']);

/**
 * Checks and compiles `rules`. Throws `TypeError`/`RangeError` naming the rule (`rules[i] (user
 * "x", api "y")`) for an unknown algorithm, an invalid limit, a duplicate or a missing default.
 * `windowBlock` (a PolicyLimiter made with `maxBlockMs`): fixed and sliding window rules keep a
 * block word after their limits. `maxBlockMs` (the same): every GCRA limit takes a tick whose
 * state holds a block that long (math/gcra.ts wideTickHolding; `RangeError` naming the limit when
 * none does).
 */
export function compileRules(rules: unknown, maxLogSize: number, maxStateWords?: number, windowBlock = false, maxBlockMs?: number): CompiledRules {
  if (!Array.isArray(rules)) throw new TypeError(`rules must be an array of { user?, api?, algorithm?, limit }, got ${describe(rules)}`);
  let fallback: CompiledRule | undefined;
  const byUser = new Map<string, CompiledRule>();
  const byApi = new Map<string, CompiledRule>();
  const byPair = new Map<string, Map<string, CompiledRule>>();
  const byShape = new Map<number, CompiledRule[]>();
  const seen = new Map<string, string>();
  let stateWords = 1;
  rules.forEach((raw: unknown, i) => {
    const name = label(raw, i);
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new TypeError(`${name} must be an object, got ${describe(raw)}`);
    checkNames(raw, RULE_FIELDS, name, 'policy rule field');
    const rule = raw as PolicyRule;
    for (const field of ['user', 'api'] as const) {
      const v = rule[field];
      if (v !== undefined && (typeof v !== 'string' || v.length === 0)) throw new TypeError(`${name}.${field} must be a non-empty string, got ${describe(v)}`);
    }
    const id = JSON.stringify([rule.user ?? null, rule.api ?? null]);
    const earlier = seen.get(id);
    if (earlier !== undefined) throw new RangeError(`${name} duplicates ${earlier}`);
    seen.set(id, name);
    const algorithm = checkAlgorithm(rule.algorithm ?? 'gcra', `${name}.algorithm`);
    const list = Array.isArray(rule.limit) ? rule.limit : [rule.limit];
    if (list.length === 0 || list.length > MAX_LIMITS) throw new RangeError(`${name}.limit must hold 1 to ${MAX_LIMITS} limits, got ${list.length}`);
    const blockWord = windowBlock && blockable(algorithm);
    // GCRA limits whose blocks must last maxBlockMs: the tick of each, named as compileConfig names it.
    const ruleTicksPs = algorithm === 'gcra' && maxBlockMs !== undefined
      ? list.map((l, j) => wideTickHolding(l, list.length > 1 ? `${name}.limit[${j}]` : `${name}.limit`, maxBlockMs))
      : null;
    const compiled = compileConfig(
      {
        algorithm, limits: list.map((l) => ({ ...l }) as Required<Limit>), globalLimit: null, maxLogSize, windowBlock: blockWord,
        ...(ruleTicksPs === null ? {} : { ruleTicksPs }),
      },
      `${name}.limit`,
      true,
      1, // the state starts after the shape word: odd
    );
    const limits = compiled.key;
    const { shape, tickPs } = shapeOf(algorithm, list.map((l) => ({ ...l, burst: l.burst ?? Math.max(1, Math.floor(l.permits)) })), blockWord, ruleTicksPs);
    const entry: CompiledRule = {
      rule: { ...rule }, limits, shape, tickPs, tickIndex: (tickPs ?? []).map((t) => WIDE_TICKS_PS.indexOf(t)), blockWord,
    };
    stateWords = Math.max(stateWords, 1 + limits.words);
    if (maxStateWords !== undefined && 1 + limits.words > maxStateWords) {
      throw new RangeError(`${name} needs ${1 + limits.words} state words per key; this limiter has room for ${maxStateWords} (option maxStateWords)`);
    }
    byShape.set(shape, [...(byShape.get(shape) ?? []), entry]);
    if (rule.user !== undefined && rule.api !== undefined) {
      let apis = byPair.get(rule.user);
      if (!apis) byPair.set(rule.user, (apis = new Map()));
      apis.set(rule.api, entry);
    } else if (rule.user !== undefined) byUser.set(rule.user, entry);
    else if (rule.api !== undefined) byApi.set(rule.api, entry);
    else fallback = entry;
  });
  if (fallback === undefined) throw new RangeError('rules must include a default rule (one with neither user nor api)');
  return { fallback, byUser, byApi, byPair, stateWords, byShape };
}

/** The most specific rule for (user, api). */
export function match(rules: CompiledRules, user: string, api: string): CompiledRule {
  return rules.byPair.get(user)?.get(api) ?? rules.byApi.get(api) ?? rules.byUser.get(user) ?? rules.fallback;
}

/**
 * Checks a request and its cost (TypeError/RangeError naming the field); returns the pair's key,
 * `user.length:user + api` (the length prefix keeps ("ab", "c") and ("a", "bc") apart).
 */
export function checkPolicyRequest(request: unknown, cost: unknown): string {
  if (request === null || typeof request !== 'object') throw new TypeError(`request must be an object like { user, api }, got ${describe(request)}`);
  const { user, api } = request as { user?: unknown; api?: unknown };
  if (typeof user !== 'string' || user.length === 0) throw new TypeError(`request.user must be a non-empty string, got ${describe(user)}`);
  if (typeof api !== 'string' || api.length === 0) throw new TypeError(`request.api must be a non-empty string, got ${describe(api)}`);
  // Each part on its own: a user ending in a lone high surrogate and an api starting with a lone
  // low one would join into a well-formed key.
  checkWellFormed('request.user', user);
  checkWellFormed('request.api', api);
  checkCost(cost);
  return `${user.length}:${user}${api}`;
}
