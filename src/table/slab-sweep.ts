import { BUSY, C_TOMBS, ctrlWord, CLAIM_STAMP_MASK, EMPTY, LIVE, S_CTRL, S_HASH, TOMB } from './layout.js';
import { D_EMPTY, D_REF, D_TOMB, slotOfRef } from './slab-layout.js';
import type { SlabHost, SlabDirectory } from './slab-directory.js';
import { bornOld, claimAge } from './insert.js';
import { processNow } from '../time/clock.js';

/**
 * Sweeps of a SLAB table and compaction of its directory (slab-layout.ts; docs/design.md, "The
 * slab layout"). A sweep reclaims idle keys and long-abandoned claims slot by slot, clears the
 * entries of freed slots (a slot's claimer clears its entry: the sweep claims the slot for that),
 * then compacts each directory stripe: tombstones that no key's chain crosses become EMPTY again.
 *
 * Thread-safety: every method may run at the same time as any table method on any thread; none
 * takes a lock, and one that stops anywhere leaves only slots and entries that are right (a slot it
 * holds is taken over once reuseAfterMs old). One instance per SlotTable instance, so per thread.
 */
export class SlabSweeper {
  readonly #t: SlabHost;
  readonly #ix: SlabDirectory;
  readonly #w: Int32Array;
  /** Per-thread scratch: the entries of a compaction's step 1, the positions chains cross. */
  readonly #seen: Int32Array;
  readonly #crossed: Uint8Array;

  constructor(t: SlabHost, directory: SlabDirectory) {
    this.#t = t;
    this.#ix = directory;
    this.#w = t.words;
    this.#seen = new Int32Array(directory.perStripe);
    this.#crossed = new Uint8Array(directory.perStripe);
  }

  /**
   * Reclaims every idle key and every claim older than reuseAfterMs, clears the entries of the
   * slots freed, and compacts every directory stripe. Returns the count of slots freed (keys and claims).
   */
  sweep(): number {
    const t = this.#t;
    const w = this.#w;
    const nowMs = Math.floor(processNow());
    let count = 0;
    for (let slot = 0; slot < this.#ix.slots; slot++) {
      const base = t.base(slot);
      // Atomics.load (seq-cst): the word the reclaim, takeover or clearing starts from.
      let c = Atomics.load(w, base + S_CTRL);
      const state = c & 3;
      if (state === LIVE) {
        const tomb = t.reclaimLive(base, c);
        if (tomb === 0) continue;
        count++;
        if ((tomb & 3) !== TOMB) continue; // another thread finished it, and its clearing is that thread's or the next sweep's
        c = tomb;
      } else if (state === BUSY) {
        if (claimAge(c, nowMs) <= t.reuseAfterMs) continue;
        // A dead claimer's claim, or a cancelled one, past reuseAfterMs: compareExchange from the
        // exact word judged (changed: published, abandoned or taken over meanwhile).
        const tomb = ctrlWord(TOMB, c >>> 2);
        if (Atomics.compareExchange(w, base + S_CTRL, c, tomb) !== c) continue;
        count++;
        c = tomb;
      } else if (state !== TOMB) continue;
      this.clearFreed(slot, c);
    }
    for (let stripe = 0; stripe < this.#ix.stripes; stripe++) this.compactStripe(stripe);
    return count;
  }

  /**
   * Clears the entry of the free slot `slot` (TOMB word `c`, loaded): claims it, clears its entry,
   * and leaves it EMPTY of the same generation (free, no entry pointing at it). True if it did.
   * Stopped anywhere, the slot is free again (TOMB) or held until its claim is reuseAfterMs old,
   * and its entry is there or a tombstone: both are right.
   */
  clearFreed(slot: number, c: number): boolean {
    const w = this.#w;
    const base = this.#t.base(slot);
    // Stamped with a reading taken now, not the sweep's first (a sweep of a large table, or one
    // that stopped on its way, would place a claim already old: found by an attack).
    const claim = ctrlWord(BUSY, Math.floor(processNow()) & CLAIM_STAMP_MASK);
    // compareExchange from the tombstone seen: fails if an insert claimed the slot first (it
    // clears the entry itself).
    if (Atomics.compareExchange(w, base + S_CTRL, c, claim) !== c) return false;
    // Landed already old (insert.ts, bornOld): give it back untouched.
    if (bornOld(this.#t, claim)) {
      Atomics.compareExchange(w, base + S_CTRL, claim, c);
      return false;
    }
    // Atomics.load of the hash: the key the entry was placed for (only claimers write it).
    this.#ix.clearEntry(slot, Atomics.load(w, base + S_HASH), claim);
    // compareExchange from our claim: fails only if it was taken over (past reuseAfterMs).
    if (Atomics.compareExchange(w, base + S_CTRL, claim, ctrlWord(EMPTY, c >>> 2)) !== claim) return false;
    this.#ix.noteFreed(slot);
    return true;
  }

  /**
   * Frees what it can in directory stripe `stripe`, whose chains had no free entry for an insert:
   * reclaims the idle keys its entries point at, clears the entries of free slots, and compacts
   * it. True if an entry was freed.
   */
  reclaimStripe(stripe: number): boolean {
    const t = this.#t;
    const w = this.#w;
    const ix = this.#ix;
    let freed = false;
    for (let i = 0, pos = stripe * ix.perStripe; i < ix.perStripe; i++, pos++) {
      const e = ix.entry(pos);
      if ((e & 3) !== D_REF) continue;
      const slot = slotOfRef(e);
      const base = t.base(slot);
      // Atomics.load (seq-cst): the word the reclaim or clearing starts from.
      let c = Atomics.load(w, base + S_CTRL);
      if ((c & 3) === LIVE) {
        const tomb = t.reclaimLive(base, c);
        if ((tomb & 3) !== TOMB) continue;
        c = tomb;
      } else if ((c & 3) !== TOMB) continue;
      if (this.clearFreed(slot, c)) freed = true;
    }
    return this.compactStripe(stripe) !== 0 || freed;
  }

  /**
   * Turns the directory tombstones of `stripe` that no chain crosses back into EMPTY entries; returns
   * how many. compaction.ts's three steps, on entries:
   *
   * 1. Load every entry. A tombstone is cleared only by a compareExchange from the word loaded
   *    here: tombstone words do not come back to an entry (slab-layout.ts), so it succeeds only if
   *    the entry stayed that tombstone all along.
   * 2. Load every entry again, after step 1. A REF entry keeps its chain open: that of its slot's
   *    key while the slot holds it (LIVE) or is free (TOMB, EMPTY, a cancelled claim: the entry is
   *    stale, and the slot's next claimer searches the chain from its home for it, clearEntry). Its
   *    hash is read between two loads of the slot's ctrl word and of the entry that agree. A claim
   *    in progress (BUSY, not cancelled, not expired): give up, as compaction.ts does.
   * 3. Clear each tombstone of step 1 that no chain of step 2 crosses (compareExchange to EMPTY).
   *
   * An inserter whose chain crosses a cleared entry and which placed its own entry after we loaded
   * that position in step 2 re-scans its chain after placing, so after step 1: it sees the free
   * entry and gives its own up (SlabDirectory.insert, step 4). One that placed before is seen here.
   */
  compactStripe(stripe: number): number {
    const ix = this.#ix;
    const S = ix.perStripe;
    const start = stripe * S;
    const seen = this.#seen;
    let tombs = 0;
    for (let i = 0; i < S; i++) {
      // Atomics.load (seq-cst): step 1, before every load of step 2.
      const e = ix.entry(start + i);
      seen[i] = e;
      if ((e & 3) === D_TOMB) tombs++;
    }
    if (tombs === 0) return 0;
    const t = this.#t;
    const w = this.#w;
    const crossed = this.#crossed;
    crossed.fill(0);
    for (let i = 0; i < S; i++) {
      // Atomics.load (seq-cst): step 2, after step 1.
      const e = ix.entry(start + i);
      if ((e & 3) !== D_REF) continue;
      const base = t.base(slotOfRef(e));
      const c = Atomics.load(w, base + S_CTRL);
      if ((c & 3) === BUSY && !t.cancelExpired(base, c)) return 0;
      // Atomics.load of the hash, then of ctrl and the entry again: unchanged, the hash is that
      // of the key the entry was placed for (a claimer clears a slot's entry before it writes a
      // new hash, and places a new entry only after).
      const hash = Atomics.load(w, base + S_HASH);
      if (Atomics.load(w, base + S_CTRL) !== c || ix.entry(start + i) !== e) return 0;
      for (let j = ix.home(hash) & (S - 1); j !== i; j = (j + 1) & (S - 1)) crossed[j] = 1;
    }
    let cleared = 0;
    for (let i = 0; i < S; i++) {
      const e = seen[i] as number;
      if ((e & 3) !== D_TOMB || crossed[i] === 1) continue;
      // compareExchange from the tombstone loaded in step 1: fails if the entry was taken since.
      if (Atomics.compareExchange(w, ix.entryWord(start + i), e, D_EMPTY) === e) cleared++;
    }
    if (cleared !== 0) t.count(start, C_TOMBS, -cleared);
    return cleared;
  }

  /**
   * Probe lengths through the directory (SlotTable.probeLengths): a hit, for each entry of a LIVE slot
   * (1 at its home); a miss, from each position taken as a home up to the first EMPTY entry.
   */
  probeLengths(): { mean: number; max: number; missMean: number; missMax: number } {
    const t = this.#t;
    const w = this.#w;
    const ix = this.#ix;
    const S = ix.perStripe;
    const total = ix.stripes * S;
    let n = 0;
    let sum = 0;
    let max = 0;
    for (let pos = 0; pos < total; pos++) {
      const e = ix.entry(pos);
      if ((e & 3) !== D_REF) continue;
      const base = t.base(slotOfRef(e));
      if ((Atomics.load(w, base + S_CTRL) & 3) !== LIVE) continue;
      const probes = ((pos - ix.home(Atomics.load(w, base + S_HASH))) & (S - 1)) + 1;
      n++;
      sum += probes;
      if (probes > max) max = probes;
    }
    let missSum = 0;
    let missMax = 0;
    for (let start = 0; start < total; start += S) {
      let toEmpty = S;
      for (let pass = 0; pass < 2; pass++) {
        for (let i = S - 1; i >= 0; i--) {
          toEmpty = ix.entry(start + i) === D_EMPTY ? 1 : Math.min(S, toEmpty + 1);
          if (pass === 1) {
            missSum += toEmpty;
            if (toEmpty > missMax) missMax = toEmpty;
          }
        }
      }
    }
    return { mean: n === 0 ? 0 : sum / n, max, missMean: missSum / total, missMax };
  }

  /** Directory tombstones: what the gauges count as the table's tombstones (C_TOMBS). */
  tombstones(): number {
    const ix = this.#ix;
    let n = 0;
    for (let pos = 0; pos < ix.stripes * ix.perStripe; pos++) if ((ix.entry(pos) & 3) === D_TOMB) n++;
    return n;
  }
}
