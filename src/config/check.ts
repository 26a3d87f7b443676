/**
 * Argument checks shared by every entry point. Each throws before anything is changed, and the
 * message names the argument and the value it was given.
 */

/** Renders a value for an error message without throwing on exotic inputs. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'symbol') return value.toString();
  if (typeof value === 'function') return 'a function';
  if (value === null || typeof value !== 'object') return String(value);
  if (Array.isArray(value)) return 'an array';
  return 'an object';
}

/** `String.prototype.isWellFormed` (Node 20+; the ES2022 lib we compile against lacks it). */
export function isWellFormed(s: string): boolean {
  return (s as string & { isWellFormed(): boolean }).isWellFormed();
}

/**
 * Throws `TypeError` naming `name` for a string with a lone surrogate: UTF-8 stores it as U+FFFD,
 * so two such keys would share one state.
 */
export function checkWellFormed(name: string, value: string): void {
  if (!isWellFormed(value)) throw new TypeError(`${name} must be a well-formed string (no lone surrogates), got ${describe(value)}`);
}

/**
 * Throws unless `cost` is an integer from 0 to 2^53 - 1 (a larger one is not exact as a number:
 * 2^53 + 1 reads as 2^53). The common cost, 1, costs one comparison.
 */
export function checkCost(cost: unknown, name = 'cost'): void {
  if (cost !== 1 && !(Number.isSafeInteger(cost) && (cost as number) >= 0)) {
    const why = `${name} must be an integer from 0 to 2^53 - 1 (Number.MAX_SAFE_INTEGER), got ${describe(cost)}`;
    throw typeof cost === 'number' ? new RangeError(why) : new TypeError(why);
  }
}

/** Throws unless `value` is a finite number greater than zero. */
export function positiveFinite(name: string, value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number, got ${describe(value)}`);
  if (!Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive finite number, got ${describe(value)}`);
  }
  return value;
}

/** Throws unless `value` is an integer in [min, max]. */
export function integerInRange(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be an integer, got ${describe(value)}`);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}
