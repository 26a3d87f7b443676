import type { Decision } from '../rate/types.js';

/** What a handler's check returns for a request its `skip` or `allowList` lets through uncounted. */
export const SKIPPED: Outcome = Object.freeze({
  allowed: true,
  decision: Object.freeze({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'allowed' }),
  fields: null,
  retryAfter: undefined,
}) as Outcome;

/** What one check decided, with the fields to set. */
export interface Outcome {
  allowed: boolean;
  decision: Decision;
  /** The fields to set, name then value (header-modes.ts), or null with no headers. */
  fields: string[] | null;
  /** The Retry-After value on a refusal that can pass later. */
  retryAfter: string | undefined;
  /** Gives an admitted request's spend back (skipSuccessfulRequests, skipFailedRequests: give-back.ts); absent otherwise. */
  giveBack?: () => void;
}
