import { describe } from '../config/check.js';
import type { Decision } from '../rate/types.js';
import { jointOnly, jointValue, rateLimitValue, type PolicyFields } from './headers.js';

/**
 * The header fields the middleware can send, by the draft of the IETF RateLimit fields a client
 * reads, and the legacy `X-RateLimit-*` fields:
 *
 *   draft-11 (and `true`)  ratelimit-policy: "10-per-1s";q=10;w=1    one item per limit; t is the
 *                          ratelimit: "10-per-1s";r=3;t=1            wait for more quota (headers.ts)
 *   draft-8                the same fields; t is the wait until the limit is full again
 *   draft-7                ratelimit-policy: 10;w=1                  one limit: the binding one
 *                          ratelimit: limit=10, remaining=3, reset=1
 *   draft-6                ratelimit-policy: 10;w=1                  one limit: the binding one
 *                          ratelimit-limit: 10, ratelimit-remaining: 3, ratelimit-reset: 1
 *   legacy                 x-ratelimit-limit: 10, x-ratelimit-remaining: 3,
 *                          x-ratelimit-reset: <Unix time in seconds, rounded up, of the reset>
 *
 * Drafts 6 and 7 and the legacy fields carry one limit: of several, the one with the fewest
 * requests left (the one that refuses first; of equals, the one that takes longest to reset).
 * A decision of several limits without a state per limit (a Redis limiter's) names no limit: its
 * fields carry the limits together (one draft-8/-11 item named `"<name>+<name>"`; drafts 6 and 7
 * list every limit's `<q>;w=<w>` in `ratelimit-policy`, with the smallest quota as the limit),
 * with the fewest left and the wait until every limit is full.
 * `reset` is the seconds until that limit is full again, rounded up. Their items replace what an
 * earlier limiter on the same response set, where the draft-8 and -11 lists add to it.
 */
export type HeaderMode = 'draft-6' | 'draft-7' | 'draft-8' | 'draft-11';

const MODES: readonly unknown[] = ['draft-6', 'draft-7', 'draft-8', 'draft-11'];

/** `options.headers` checked: the mode, or null for none (`false`). `true` is the newest draft. */
export function headerMode(headers: unknown): HeaderMode | null {
  if (headers === true) return 'draft-11';
  if (headers === false) return null;
  if (MODES.includes(headers)) return headers as HeaderMode;
  throw new TypeError(`options.headers must be true, false, 'draft-6', 'draft-7', 'draft-8' or 'draft-11', got ${describe(headers)}`);
}

/**
 * The fields of one decision as a flat list (name, value, name, value, ...), lower-case names.
 * The first `stacking` fields add to what an earlier limiter set on the same response (the list
 * fields of drafts 8 and 11); the others replace it.
 */
export interface FieldList {
  (decision: Decision, policies: PolicyFields): string[];
  readonly stacking: number;
}

/**
 * A list field's value with `items` after what an earlier limiter on the same response set (the
 * fields of drafts 8 and 11 are lists: a second middleware adds its policies instead of replacing
 * the first's).
 */
export function stacked(earlier: unknown, items: string): string {
  return typeof earlier === 'string' && earlier.length > 0 ? `${earlier}, ${items}` : items;
}

/** Seconds, rounded up (at least 0). */
function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** The index of the limit that binds: the fewest left; of equals, the longest reset. */
function binding(decision: Decision, count: number): number {
  const states = decision.limits;
  if (states === undefined || count === 1) return 0;
  let best = 0;
  for (let i = 1; i < count; i++) {
    const a = states[i];
    const b = states[best];
    if (a === undefined || b === undefined) continue;
    if (a.remaining < b.remaining || (a.remaining === b.remaining && a.resetAfterMs > b.resetAfterMs)) best = i;
  }
  return best;
}

/** What limit `i` of the decision has left (the decision's own figure for one limit), whole. */
function remainingOf(decision: Decision, i: number): number {
  const own = decision.limits?.[i];
  return Math.floor(own === undefined ? decision.remaining : own.remaining);
}

/** How long until limit `i` of the decision is full again (the decision's own figure for one limit). */
function resetMsOf(decision: Decision, i: number): number {
  const own = decision.limits?.[i];
  return own === undefined ? decision.resetAfterMs : own.resetAfterMs;
}

/** The fields of draft-8: draft-11's, with t the wait until the limit is full. */
function draft8Value(decision: Decision, fields: PolicyFields): string {
  if (jointOnly(decision, fields)) return jointValue(decision, fields, true);
  let value = '';
  fields.policies.forEach((p, i) => {
    value += `${i === 0 ? '' : ', '}"${p.name}";r=${remainingOf(decision, i)};t=${seconds(resetMsOf(decision, i))}`;
  });
  return value;
}

/**
 * The writer of `mode`'s fields, with the legacy ones when `legacy`; null when there is nothing
 * to write. `wallMs` reads the time for the legacy reset (a Unix time): Date.now unless a test
 * passes its own.
 */
export function fieldWriter(mode: HeaderMode | null, legacy: boolean, wallMs: () => number = Date.now): FieldList | null {
  if (mode === null && !legacy) return null;
  /** The legacy X-RateLimit-Reset: the Unix time, in whole seconds, at which the limit is full. */
  const legacyReset = (resetMs: number): string => String(Math.ceil((wallMs() + resetMs) / 1000));
  if (mode === 'draft-8' || mode === 'draft-11') {
    const value = mode === 'draft-8' ? draft8Value : rateLimitValue;
    const write = (decision: Decision, fields: PolicyFields): string[] => {
      const out = ['ratelimit-policy', fields.policy, 'ratelimit', value(decision, fields)];
      if (legacy) {
        const i = binding(decision, fields.policies.length);
        out.push(
          'x-ratelimit-limit', jointOnly(decision, fields) ? fields.joint.quota : fields.quota[i] as string,
          'x-ratelimit-remaining', String(remainingOf(decision, i)), 'x-ratelimit-reset', legacyReset(resetMsOf(decision, i)),
        );
      }
      return out;
    };
    return Object.assign(write, { stacking: 2 });
  }
  // Drafts 6 and 7 and the legacy fields carry one limit, the binding one: its figures are read
  // once per decision.
  // A decision of several limits without a state per limit (a Redis limiter's: `jointOnly`) has
  // the limits together: the policy lists them all, the limit is the smallest quota, and the
  // reset the wait until every limit is full.
  const write = (decision: Decision, fields: PolicyFields): string[] => {
    const joint = jointOnly(decision, fields);
    const i = binding(decision, fields.policies.length);
    const remaining = String(remainingOf(decision, i));
    const resetMs = resetMsOf(decision, i);
    const quota = joint ? fields.joint.quota : fields.quota[i] as string;
    const policy = joint ? fields.joint.quotaWindow : fields.quotaWindow[i] as string;
    let out: string[];
    switch (mode) {
      case 'draft-7':
        out = ['ratelimit-policy', policy, 'ratelimit', `limit=${quota}, remaining=${remaining}, reset=${seconds(resetMs)}`];
        break;
      case 'draft-6':
        if (legacy) {
          return [
            'ratelimit-policy', policy, 'ratelimit-limit', quota, 'ratelimit-remaining', remaining,
            'ratelimit-reset', String(seconds(resetMs)),
            'x-ratelimit-limit', quota, 'x-ratelimit-remaining', remaining, 'x-ratelimit-reset', legacyReset(resetMs),
          ];
        }
        return [
          'ratelimit-policy', policy, 'ratelimit-limit', quota, 'ratelimit-remaining', remaining,
          'ratelimit-reset', String(seconds(resetMs)),
        ];
      default:
        out = [];
    }
    if (legacy) {
      out.push('x-ratelimit-limit', quota, 'x-ratelimit-remaining', remaining, 'x-ratelimit-reset', legacyReset(resetMs));
    }
    return out;
  };
  return Object.assign(write, { stacking: 0 });
}

/** `fields` with the `degraded` field last when the decision is degraded and the option names one. */
export function withDegraded(fields: string[] | null, decision: Decision, degraded: string | null): string[] | null {
  if (degraded === null || decision.degraded !== true) return fields;
  return fields === null ? [degraded, '1'] : [...fields, degraded, '1'];
}
