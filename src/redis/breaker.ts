/**
 * A circuit breaker for the calls to Redis: after `threshold` failures in a row (errors or calls
 * not answered by their deadline) it opens, and decisions answer at once without Redis for a
 * cooldown; then the next decisions go to Redis again (half open): a success closes it, a failure
 * opens it for twice as long, up to `maxCooldownMs`.
 *
 * Thread-safety: one instance per limiter instance (per thread).
 */
export class Breaker {
  #failures = 0;
  /** Closed from the start, whatever the clock's origin (performance.now() may be negative). */
  #openUntil = -Infinity;
  #cooldownMs: number;

  constructor(
    private readonly threshold = 3,
    private readonly firstCooldownMs = 100,
    private readonly maxCooldownMs = 5_000,
  ) {
    this.#cooldownMs = firstCooldownMs;
  }

  /** Whether a call may go to Redis at `nowMs`. */
  admits(nowMs: number): boolean {
    return nowMs >= this.#openUntil;
  }

  succeeded(): void {
    this.#failures = 0;
    this.#cooldownMs = this.firstCooldownMs;
  }

  failed(nowMs: number): void {
    this.#failures++;
    if (this.#failures < this.threshold || nowMs < this.#openUntil) return;
    // Open (again, if a half-open call failed): twice as long each time in a row.
    this.#openUntil = nowMs + this.#cooldownMs;
    this.#cooldownMs = Math.min(this.#cooldownMs * 2, this.maxCooldownMs);
  }
}
