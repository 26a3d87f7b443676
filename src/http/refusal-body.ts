import { describe } from '../config/check.js';
import { isThenable } from './http-inputs.js';
import type { Decision } from '../rate/types.js';

/**
 * The body of a refusal, from the adapters' `message` option: a string is sent as plain text, an
 * object as JSON (written once, when the handler is made), and a function of the request and the
 * decision gives either, or a promise of either, per refusal.
 */
export interface RefusalBody {
  /** What is sent. */
  readonly text: string;
  /** Its content type. */
  readonly type: string;
  /** What `message` gave: the string, or the object (a Fastify error handler may send it). */
  readonly value: string | object;
}

/** `message`'s forms: what `refusalBody` takes. */
export type RefusalMessage<Req> = string | object | ((req: Req, decision: Decision) => string | object | PromiseLike<string | object>);

/** The body of a refusal unless `message` says otherwise. */
export const DEFAULT_MESSAGE = 'Too Many Requests: retry later.\n';

const TEXT = 'text/plain; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';

/** The body of `value`, or `TypeError` naming `name` (a value that is neither, or that JSON cannot write). */
function bodyOf(value: unknown, name: string): RefusalBody {
  if (typeof value === 'string') return { text: value, type: TEXT, value };
  if (value !== null && typeof value === 'object') {
    let text: unknown;
    try {
      text = JSON.stringify(value);
    } catch (error) {
      throw new TypeError(`${name} must be an object JSON can write: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    if (typeof text !== 'string') throw new TypeError(`${name} must be an object JSON can write, got ${describe(value)}`);
    return { text, type: JSON_TYPE, value };
  }
  throw new TypeError(`${name} must be a string, an object, or a function (req, decision) returning one, got ${describe(value)}`);
}

/**
 * `message` checked (a bad one throws `TypeError` at once, naming `options.message`), as the body
 * of each refusal: the same body every time, or the function's, checked per refusal (a bad
 * result throws, or rejects, naming `options.message()`).
 */
export function refusalBody<Req>(message: unknown): (req: Req, decision: Decision) => RefusalBody | Promise<RefusalBody> {
  if (typeof message === 'function') {
    const make = message as (req: Req, decision: Decision) => unknown;
    return (req, decision) => {
      const value = make(req, decision);
      return isThenable(value) ? Promise.resolve(value).then((v: unknown) => bodyOf(v, 'options.message()')) : bodyOf(value, 'options.message()');
    };
  }
  const fixed = bodyOf(message, 'options.message');
  return () => fixed;
}
