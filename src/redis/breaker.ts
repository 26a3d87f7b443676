/**
 * A circuit breaker for the calls to Redis. After `threshold` failures in a row (errors, calls
 * not answered by their deadline, malformed replies) it opens: decisions answer at once without
 * Redis for a cooldown. Then it is half open: one call, the probe, goes to Redis while every other
 * decision still answers at once. The probe's success closes the breaker; its failure opens it
 * again for twice as long, up to `maxCooldownMs`. Any success closes it at once, also one of a
 * call sent before it opened that Redis answers late.
 *
 * Thread-safety: one instance per limiter instance (per thread): each limiter instance on each
 * thread has its own breaker and its own probe.
 */
export class Breaker {
  #failures = 0;
  /** Closed from the start, whatever the clock's origin (performance.now() may be negative). */
  #openUntil = -Infinity;
  #cooldownMs: number;
  /** Opened and not closed since: past #openUntil it is half open. */
  #open = false;
  /** A probe is in flight (half open): every other call answers at once. */
  #probing = false;
  /** When the probe in flight was let through. */
  #probeAt = 0;
  /** The probe in flight's token (0: none): only a failure of the call that holds it is the probe's. */
  #probe = 0;
  /** The last token given out. */
  #tokens = 0;
  /** The probe just let through has no call yet: the next `token()` gives its token. */
  #unclaimed = false;

  constructor(
    private readonly threshold = 3,
    private readonly firstCooldownMs = 100,
    private readonly maxCooldownMs = 5_000,
    /**
     * How long a probe may stay unsettled: past it, the probe counts as failed at that time (a
     * probe whose call never settles, or that never got a call, must not keep the breaker half
     * open for ever). Its call's own deadline is no later, so this is a backstop.
     */
    private readonly probeTimeoutMs = 5_000,
  ) {
    this.#cooldownMs = firstCooldownMs;
  }

  /** Whether a call made at `nowMs` would go to Redis (no side effect: for monitoring). */
  admits(nowMs: number): boolean {
    return !this.#open || (nowMs >= this.#openUntil && (!this.#probing || nowMs >= this.#probeAt + this.probeTimeoutMs));
  }

  /**
   * Whether the call about to be made at `nowMs` goes to Redis; if it is the half-open breaker's
   * probe, no other call goes until the probe's call (the next one queued: `token`) settles, or
   * `probeTimeoutMs` passes.
   */
  pass(nowMs: number): boolean {
    if (!this.#open) return true;
    // A probe that never settled: failed at its timeout.
    if (this.#probing && nowMs >= this.#probeAt + this.probeTimeoutMs) this.#reopen(this.#probeAt + this.probeTimeoutMs);
    if (nowMs < this.#openUntil || this.#probing) return false;
    this.#probing = true;
    this.#probeAt = nowMs;
    this.#probe = ++this.#tokens;
    this.#unclaimed = true;
    return true;
  }

  /**
   * The token of a call about to be queued for this breaker's server, to give back to `failed`:
   * the probe's, when `pass` just let the probe through and no call has taken it yet (callers
   * queue the probe's call at once, in the same tick), else 0. A probe is thus told by its token,
   * not by its time: a call whose deadline was set before the probe was let through (a Cluster
   * key's call after the cap's) is still the probe.
   */
  token(): number {
    if (!this.#unclaimed) return 0;
    this.#unclaimed = false;
    return this.#probe;
  }

  /** Redis answered a call: closed at once, the cooldown back to its first length. */
  succeeded(): void {
    this.#failures = 0;
    this.#cooldownMs = this.firstCooldownMs;
    this.#open = false;
    this.#probing = false;
    this.#probe = 0;
    this.#unclaimed = false;
    this.#openUntil = -Infinity;
  }

  /**
   * A call holding `token` (from `token()`) failed at `nowMs`. While the breaker is open, only
   * the probe's failure counts: any other call was made before the breaker opened (every call
   * since answered without Redis), or is not the probe, and its late failure changes nothing.
   */
  failed(nowMs: number, token: number): void {
    this.#failures++;
    if (this.#open && !(this.#probing && token !== 0 && token === this.#probe)) return;
    if (!this.#open && this.#failures < this.threshold) return;
    this.#reopen(nowMs);
  }

  /** Open, or open again after a failed probe: twice as long each time in a row. */
  #reopen(nowMs: number): void {
    this.#open = true;
    this.#probing = false;
    this.#probe = 0;
    this.#unclaimed = false;
    this.#openUntil = nowMs + this.#cooldownMs;
    this.#cooldownMs = Math.min(this.#cooldownMs * 2, this.maxCooldownMs);
  }
}

/**
 * What the calls to one Redis server share: its breaker, and its places for calls in flight. A
 * standalone server is one group; a Cluster has one per primary, so that a primary that fails
 * opens only its own breaker and holds up only its own calls: the keys of the others go on.
 */
export class NodeGroup {
  readonly breaker: Breaker;
  /** Calls sent to this server and not yet settled. */
  inFlight = 0;

  /** `timeoutMs`: the calls' timeout, after which a probe that never settled counts as failed. */
  constructor(timeoutMs = 5_000) {
    this.breaker = new Breaker(3, 100, 5_000, timeoutMs);
  }
}

/**
 * The groups of one batcher, by primary address ('' for a standalone server, or for a slot whose
 * primary the client does not know yet). A slot's group is looked up at each decision, from the
 * client's slot table: after a failover or a resharding (the client follows MOVED and learns the
 * new primary) the slot's decisions go to the new primary's group, whose breaker starts closed.
 *
 * Thread-safety: one instance per batcher, so per limiter instance and thread.
 */
export class NodeGroups {
  readonly #groups = new Map<string, NodeGroup>();

  /** `timeoutMs`: the calls' timeout (each breaker's probe timeout). */
  constructor(private readonly timeoutMs = 5_000) {}

  /** The group of the primary at `address`, made on first use. */
  of(address: string): NodeGroup {
    let g = this.#groups.get(address);
    if (g === undefined) {
      g = new NodeGroup(this.timeoutMs);
      this.#groups.set(address, g);
    }
    return g;
  }

  /** Whether any group's breaker keeps calls from its server at `nowMs` (for monitoring). */
  anyOpen(nowMs: number): boolean {
    for (const g of this.#groups.values()) if (!g.breaker.admits(nowMs)) return true;
    return false;
  }
}
