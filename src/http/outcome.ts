import type { Decision } from '../rate/types.js';

/** What a handler's check returns for a request its `skip` or `allowList` lets through uncounted. */
export const SKIPPED: Outcome = Object.freeze({
  allowed: true,
  decision: Object.freeze({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'allowed' }),
  fields: null,
  retryAfter: undefined,
}) as Outcome;

/**
 * What a handler's check returns for a request whose key is on its `denyList`: refused at once,
 * uncounted, answered 403 Forbidden without RateLimit fields or Retry-After.
 */
export const DENIED: Outcome = Object.freeze({
  allowed: false,
  decision: Object.freeze({ allowed: false, remaining: 0, retryAfterMs: Infinity, resetAfterMs: 0, reason: 'limited' }),
  fields: null,
  retryAfter: undefined,
  denied: true,
}) as Outcome;

/** The status and body of a refusal by the deny list. */
export const DENIED_STATUS = 403;
export const DENIED_BODY = 'Forbidden\n';

/** What one check decided, with the fields to set. */
export interface Outcome {
  allowed: boolean;
  decision: Decision;
  /** The fields to set, name then value (header-modes.ts), or null with no headers. */
  fields: string[] | null;
  /** The Retry-After value on a refusal that can pass later. */
  retryAfter: string | undefined;
  /** True for a key on the deny list (DENIED), or banned (ban.ts): answered 403; absent otherwise. */
  denied?: true;
  /** True for a refusal turned into a ban (ban.ts); absent otherwise. */
  banned?: true;
  /** Gives an admitted request's spend back (skipSuccessfulRequests, skipFailedRequests: give-back.ts); absent otherwise. */
  giveBack?: () => void;
  /**
   * What a hook (observers.ts) threw after an admission with a `giveBack`: the adapter attaches
   * the give-back to the response, then passes the error on as any other. Absent otherwise.
   */
  thrown?: { error: unknown };
}
