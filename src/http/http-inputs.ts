import { checkCost, describe } from '../config/check.js';

/**
 * Inputs the HTTP adapters check the same way: a cost option, a header name, an allow list, a
 * promise from a function of the options, and an error handed on to a Fastify continuation. Pure;
 * any thread.
 */

/**
 * Whether `value` is a promise as `await` reads one: an object or a function with a callable
 * `then`. Not `instanceof Promise`, which misses another realm's promise (node:vm) and thenables
 * such as Bluebird's or a Mongoose Query, and a thenable read as a plain value is truthy (found: a
 * `skip` returning one skipped every request). A string, number or boolean costs one typeof.
 */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * A cost option as a function of the request: an integer from 0 to 2^53 - 1 (checked), or a
 * function; else `TypeError` naming `name`. For the adapters' `cost` and a Fastify route's.
 */
export function costFunction<Req>(cost: unknown, name: string): (req: Req) => number | PromiseLike<number> {
  if (typeof cost === 'number') {
    checkCost(cost, name);
    return () => cost;
  }
  if (typeof cost === 'function') return cost as (req: Req) => number | PromiseLike<number>;
  throw new TypeError(`${name} must be an integer from 0 to 2^53 - 1, or a function, got ${describe(cost)}`);
}

/** An error handed to a Fastify continuation: an Error as it is, anything else wrapped in one. */
export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** An HTTP field name (RFC 9110, section 5.1: a token), lower-cased; else `TypeError` naming `name`. */
export function fieldName(value: unknown, name: string): string {
  if (typeof value !== 'string' || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(value)) {
    throw new TypeError(`${name} must be a header field name (letters, digits and !#$%&'*+-.^_\`|~), got ${describe(value)}`);
  }
  return value.toLowerCase();
}

/**
 * `allowList` or `denyList` (`name`) checked (`TypeError` naming it), as a test of a request and
 * its key; undefined when absent.
 */
export function allowListOf<Req>(list: unknown, name = 'allowList'): ((req: Req, key: string) => boolean | PromiseLike<boolean>) | undefined {
  if (list === undefined) return undefined;
  if (typeof list === 'function') return list as (req: Req, key: string) => boolean | PromiseLike<boolean>;
  if (!Array.isArray(list) || !list.every((k) => typeof k === 'string')) {
    throw new TypeError(`options.${name} must be an array of keys (strings) or a function (req, key), got ${describe(list)}`);
  }
  const keys = new Set<string>(list as string[]);
  return (_req, key) => keys.has(key);
}
