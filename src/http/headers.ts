import { describe } from '../config/check.js';
import { ULP_GUARD } from '../time/ticks.js';
import { validateLimit, type Limit } from '../config/limit.js';
import type { Decision } from '../rate/rate-limiter.js';

/**
 * The `RateLimit-Policy` and `RateLimit` response fields of draft-ietf-httpapi-ratelimit-headers-11
 * (23 May 2026), and `Retry-After` (RFC 9110, section 10.2.3) on a refusal.
 *
 * Both fields are Structured Field Lists (RFC 9651). Each item is a String naming a policy, with
 * Integer parameters:
 *
 *   ratelimit-policy: "10-per-1s";q=10;w=1, "100-per-60s";q=100;w=60;sluice-burst=20
 *   ratelimit: "10-per-1s";r=3;t=1, "100-per-60s";r=3;t=1
 *   retry-after: 1
 *
 * What a GCRA limit advertises: `q` and `w` state the sustained rate, `permits` per `periodMs`,
 * and never the extra a full bucket allows on top of it. `w` must be whole seconds, so a period
 * that is not is stretched to the next whole second and `q` scaled with it, rounded down (500 ms
 * for 5 becomes q=10;w=1; 1,500 ms for 3 becomes q=4;w=2), so a client that spreads q requests
 * evenly over w is never refused. The bucket capacity goes in the vendor parameter
 * `sluice-burst` (the draft asks for a vendor prefix on such parameters) when it differs from
 * `q`: it is how many requests a rested client may send at one instant. Window and log
 * algorithms advertise the same q and w and no `sluice-burst` (burst does not apply to them).
 *
 * What a decision reports, per policy item: `r` is what the limit has left (`remaining`); `t` is
 * the seconds, rounded up, until it has more again ("additional quota", draft -10 and later), 0
 * when it is full, the same meaning on a 200 and on a 429 (where Retry-After says when the
 * refused request itself, of its cost, would pass). Several limits give one item each, each with
 * its own `r` and `t` (`decision.limits`); a decision of several limits without them (a Redis
 * limiter's) gives one item for the limits together, named by their names joined with `+`:
 *
 *   ratelimit: "3-per-60s+5-per-3600s";r=2;t=720
 *
 * `rateLimitHeaders` reads its limits as GCRA ones.
 */

/** Header field name (lower-case, as HTTP/2 and Node's `getHeaders()` spell them) to value. Plain data, safe to send between threads. */
export interface RateLimitHeaders {
  /** The policies: one item per limit, `"<q>-per-<w>s";q=<int>;w=<int>[;sluice-burst=<int>]`. */
  'ratelimit-policy': string;
  /** The service limit now: one item per limit, `"<name>";r=<int>;t=<int>`. */
  'ratelimit': string;
  /** Seconds until the refused request would pass, rounded up, at least 1. Only on a refusal that can pass later. */
  'retry-after'?: string;
}

/** One limit as advertised: its policy name and its `ratelimit-policy` item. Plain data, safe on any thread. */
export interface AdvertisedPolicy {
  readonly name: string;
  readonly item: string;
  /** The advertised quota and its window in whole seconds. */
  readonly q: number;
  readonly w: number;
  /** What `t` needs: the limit's kind, its emission interval (ms), burst and permits. */
  readonly gcra: boolean;
  readonly intervalMs: number;
  readonly burst: number;
  readonly permits: number;
}

/** Largest Integer a Structured Field may carry (RFC 9651, section 3.3.1). */
const SF_MAX_INTEGER = 999_999_999_999_999;

function sfInteger(n: number): number {
  return Math.min(n, SF_MAX_INTEGER);
}

/** Seconds, rounded up, as a non-negative SF Integer. */
function ceilSeconds(ms: number): number {
  return sfInteger(Math.ceil(ms / 1000));
}

/**
 * Checks `limit` (one Limit or a non-empty array) and returns the advertised policy of each, in
 * order. `gcra` false: the limits count windows, where `burst` does not apply, so no
 * `sluice-burst`. Throws `TypeError`/`RangeError` naming the argument (`limit`,
 * `limit[1].periodMs`, ...). Pure; safe on any thread.
 */
export function advertisePolicies(limit: Limit | readonly Limit[], gcra = true): AdvertisedPolicy[] {
  const list: readonly unknown[] = Array.isArray(limit) ? limit : [limit];
  if (list.length === 0) throw new RangeError('limit must hold at least one Limit, got an empty array');
  const seen = new Set<string>();
  return list.map((raw, i) => {
    const label = Array.isArray(limit) ? `limit[${i}]` : 'limit';
    const { permits, periodMs, burst } = validateLimit(raw, label);
    // w: whole seconds, at least the period and at least one emission interval, so q >= 1.
    const intervalMs = periodMs / permits;
    const wSec = sfInteger(Math.max(1, Math.ceil(periodMs / 1000), Math.ceil(intervalMs / 1000)));
    const q = sfInteger(Math.max(1, Math.floor(((wSec * 1000) / intervalMs) * ULP_GUARD)));
    let policy = `${q}-per-${wSec}s`;
    for (let n = 2; seen.has(policy); n++) policy = `${q}-per-${wSec}s-${n}`;
    seen.add(policy);
    const burstParam = gcra && burst !== q ? `;sluice-burst=${burst}` : '';
    return { name: policy, item: `"${policy}";q=${q};w=${wSec}${burstParam}`, q, w: wSec, gcra, intervalMs, burst, permits };
  });
}

/** Checks a Decision's fields, naming the one that is wrong. */
function checkDecision(decision: unknown): Decision {
  if (decision === null || typeof decision !== 'object' || Array.isArray(decision)) {
    throw new TypeError(`decision must be a Decision like { allowed, remaining, retryAfterMs, resetAfterMs }, got ${describe(decision)}`);
  }
  const d = decision as Partial<Decision>;
  if (typeof d.allowed !== 'boolean') throw new TypeError(`decision.allowed must be a boolean, got ${describe(d.allowed)}`);
  for (const field of ['remaining', 'resetAfterMs', 'retryAfterMs'] as const) {
    const value = d[field];
    if (typeof value !== 'number') throw new TypeError(`decision.${field} must be a number, got ${describe(value)}`);
    // retryAfterMs alone may be Infinity (a cost over the burst never passes).
    const finiteOk = field === 'retryAfterMs' ? !Number.isNaN(value) : Number.isFinite(value);
    if (!finiteOk || value < 0) {
      throw new RangeError(`decision.${field} must be a ${field === 'retryAfterMs' ? '' : 'finite '}number >= 0, got ${describe(value)}`);
    }
  }
  return d as Decision;
}

/**
 * `Retry-After` for a refusal: seconds until the same request would pass, rounded up, at least 1
 * (a refusal never says "come back at once"); undefined when the decision is an admission or the
 * request can never pass (cost over the burst: no wait helps). Pure; safe on any thread.
 */
export function retryAfterSeconds(decision: Decision): string | undefined {
  if (decision.allowed || decision.retryAfterMs === Infinity) return undefined;
  return String(Math.max(1, ceilSeconds(decision.retryAfterMs)));
}

/** A limiter's policies as its fields need them: the `ratelimit-policy` value (the same on every response) and each policy. */
export interface PolicyFields {
  readonly policy: string;
  readonly policies: readonly AdvertisedPolicy[];
  /** Per policy: its `q` as text, and its draft-6/-7 `ratelimit-policy` value `<q>;w=<w>` (made once, not per request). */
  readonly quota: readonly string[];
  readonly quotaWindow: readonly string[];
  /**
   * The limits together, for a decision of several limits without a state per limit (a Redis
   * limiter's): the item's name (the policies' names joined by `+`), the smallest `q` as text,
   * every limit's `<q>;w=<w>`, and the smallest capacity (a GCRA burst, a window's permits).
   */
  readonly joint: { readonly name: string; readonly quota: string; readonly quotaWindow: string; readonly capacity: number };
}

/** `policies` (from `advertisePolicies`) as fields, built once per limiter or rule. */
export function policyFields(policies: readonly AdvertisedPolicy[]): PolicyFields {
  return {
    policy: policies.map((p) => p.item).join(', '),
    policies,
    quota: policies.map((p) => String(p.q)),
    quotaWindow: policies.map((p) => `${p.q};w=${p.w}`),
    joint: {
      name: policies.map((p) => p.name).join('+'),
      quota: String(Math.min(...policies.map((p) => p.q))),
      quotaWindow: policies.map((p) => `${p.q};w=${p.w}`).join(', '),
      capacity: Math.min(...policies.map((p) => (p.gcra ? p.burst : p.permits))),
    },
  };
}

/**
 * Whether `decision` reports its limits together only: several limits and no state per limit (a
 * Redis limiter's decision holds the fewest left and the wait until every limit is full). Its
 * fields then carry one item for the limits together: giving each limit those numbers would
 * say one limit's figures of another.
 */
export function jointOnly(decision: Decision, fields: PolicyFields): boolean {
  return decision.limits === undefined && fields.policies.length > 1;
}

/**
 * The `ratelimit` item of the limits together (`jointOnly`): `r` the fewest left; `t` the seconds
 * until every limit is full again (by then there is more, unless the fewest left is already the
 * smallest capacity: 0), or until every limit is full (`untilFull`, draft-8).
 */
export function jointValue(decision: Decision, fields: PolicyFields, untilFull: boolean): string {
  const r = Math.floor(decision.remaining);
  const t = !untilFull && r >= fields.joint.capacity ? 0 : ceilSeconds(decision.resetAfterMs);
  return `"${fields.joint.name}";r=${sfInteger(r)};t=${t}`;
}

/**
 * Seconds, rounded up, until the limit holds more than `remaining` again ("additional quota",
 * the draft's `t`); 0 when it is full. A GCRA limit gains one request an emission interval after
 * its debt last crossed a whole interval: its reset (the time to a full bucket) less the
 * intervals still missing after the next one. A window gains back at its reset (the sliding
 * window and the log earlier, as their counts age: their `t` is that upper bound).
 */
function moreQuotaSeconds(p: AdvertisedPolicy, remaining: number, resetMs: number): number {
  const r = Math.floor(remaining);
  if (p.gcra) {
    if (r >= p.burst) return 0;
    return ceilSeconds(Math.max(0, resetMs - (p.burst - r - 1) * p.intervalMs));
  }
  if (r >= p.permits) return 0;
  return ceilSeconds(resetMs);
}

/**
 * The `ratelimit` value for `decision` (assumed checked): one item per policy, each with its
 * limit's own `r` and `t` (`decision.limits`, several limits; the decision's for one limit), or
 * one item for the limits together when the decision has no state per limit (`jointOnly`). Built
 * with few strings per request: the middleware runs it on every response.
 */
export function rateLimitValue(decision: Decision, fields: PolicyFields): string {
  if (jointOnly(decision, fields)) return jointValue(decision, fields, false);
  const policies = fields.policies;
  let value = '';
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i] as AdvertisedPolicy;
    const own = decision.limits?.[i];
    const remaining = own === undefined ? decision.remaining : own.remaining;
    const resetMs = own === undefined ? decision.resetAfterMs : own.resetAfterMs;
    value += `${i === 0 ? '' : ', '}"${p.name}";r=${sfInteger(Math.floor(remaining))};t=${moreQuotaSeconds(p, remaining, resetMs)}`;
  }
  return value;
}

/**
 * The `ratelimit-policy` and `ratelimit` fields for `decision` under `policies` (from
 * `advertisePolicies`), both assumed checked. Pure; safe on any thread.
 */
export function rateLimitFields(decision: Decision, policies: readonly AdvertisedPolicy[]): Pick<RateLimitHeaders, 'ratelimit-policy' | 'ratelimit'> {
  const fields = policyFields(policies);
  return { 'ratelimit-policy': fields.policy, 'ratelimit': rateLimitValue(decision, fields) };
}

/**
 * The `ratelimit-policy` and `ratelimit` fields (draft-ietf-httpapi-ratelimit-headers-11) for a
 * decision under `limit` (one Limit, or an array: one policy item each), plus `retry-after` in
 * whole seconds, rounded up, when the decision is a refusal that can pass later. Names are
 * lower-case. Throws `TypeError`/`RangeError` naming the argument and value for a bad decision
 * or limit. Pure; safe on any thread.
 */
export function rateLimitHeaders(decision: Decision, limit: Limit | readonly Limit[]): RateLimitHeaders {
  const checked = checkDecision(decision);
  if (limit === null || typeof limit !== 'object') {
    throw new TypeError(`limit must be a Limit like { permits, periodMs } or an array of them, got ${describe(limit)}`);
  }
  const policies = advertisePolicies(limit);
  // A decision of several limits has one state per limit: they must be the limits given, in
  // number (found: a 2-limit decision under 1 limit gave 1 item without complaint).
  const states = checked.limits;
  if (states !== undefined && (!Array.isArray(states) || states.length !== policies.length)) {
    const held = Array.isArray(states) ? `${states.length} limit states` : describe(states);
    throw new RangeError(`decision.limits must hold one state per limit (${policies.length}), got ${held}: pass the limits the decision was made under`);
  }
  const headers: RateLimitHeaders = rateLimitFields(checked, policies);
  const retryAfter = retryAfterSeconds(checked);
  if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
  return headers;
}
