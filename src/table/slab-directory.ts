import {
  BUSY, C_DISPLACED, C_LIVE, C_TOMBS, CLAIM_STAMP_MASK, ctrlWord, EMPTY, H_SLAB_CURSORS, H_SLAB_SLOTS, H_DIRECTORY, H_DIRECTORY_SEQS,
  LIVE, PAYLOAD_MASK, S_CTRL, S_HASH, stripeOfHash, TOMB,
} from './layout.js';
import { D_EMPTY, D_REF, D_TOMB, refWord, slotOfRef, tagMatches, tombWord } from './slab-layout.js';
import { awaitClaim, bornOld, claimAge, judgeOther, OTHER_CHANGED, OTHER_COPY, OTHER_PASS, RETRY, TABLE_FULL, writeKey, type InsertHost } from './insert.js';
import type { SlotState } from './table.js';
import { processNow } from '../time/clock.js';

/**
 * Finding and inserting keys in a SLAB table (slab-layout.ts): a key's slot is whichever free
 * slot its inserter's thread took next, and its directory entry, in the key's probe chain, points at
 * it (docs/design.md, "The slab layout"). Sweeps and compaction of the directory: slab-sweep.ts.
 *
 * The insert protocol is the HASHED table's (insert.ts) with the directory entry in the place of the
 * slot: claim a slot, write the key, place the entry at the first free position of the chain,
 * re-scan the chain for a copy of the key inserted or being inserted meanwhile, write the fresh
 * state, publish the slot. What the chain holds is entries; what an entry's key is, and whether
 * it is there, its slot says.
 *
 * Thread-safety: every method may run at the same time as any table method on any thread; none
 * takes a lock. One instance per SlotTable instance, so per thread (it holds a cursor).
 */

/** What the slab directory needs of its table (SlotTable). */
export interface SlabHost extends InsertHost {
  /** Directory stripes (H_STRIPES; their length is slotsPerStripe). */
  readonly stripes: number;
  /** Reclaims the slot at `base`, loaded as the LIVE word `ctrl`, if its key is idle (SlotTable.reclaimLive). */
  reclaimLive(base: number, ctrl: number): number;
  /** Completes a reclaim whose state is already the reclaim marker (SlotTable.finishReclaim). */
  finishReclaim(base: number, ctrl: number): boolean;
  /** Whether the claim in BUSY word `c` at `base` can never be published (cancelling it if it expired). */
  cancelExpired(base: number, c: number): boolean;
  /** The table's gauges from its counters (SlotTable.gauges): liveKeys and maxKeys among them. */
  gauges(): { liveKeys: number; maxKeys: number };
}

export class SlabDirectory {
  readonly #t: SlabHost;
  readonly #state: SlotState;
  readonly #w: Int32Array;
  /** Slots in the table. */
  readonly slots: number;
  /** Word index of the directory's first entry, and of the first stripe's tombstone sequence. */
  readonly #ix: number;
  readonly #seqs: number;
  readonly stripes: number;
  readonly perStripe: number;
  readonly #mask: number;
  readonly #homeShift: number;
  readonly #inlineWords: number;
  readonly #refOffset: number;
  /** The next slot this thread's search for a free slot looks at (its own cursor: see claimSlot). */
  #cursor: number;
  /** The LIVE ctrl word that the last insert to return a slot published. */
  ctrl = 0;
  /** The ctrl word of the slot the last successful `find` returned. */
  foundCtrl = 0;
  /** The word a successful claimSlot claimed the slot from, and its claim word. */
  #from = 0;
  #claim = 0;
  /**
   * Slots this thread's sweeps freed lately, taken before the cursor's (a stack, newest first):
   * a key that arrives after a sweep takes the slot an idle key left, as in a HASHED table, and
   * the cursor's run of slots stays for keys that arrive together. Per thread, plain; a hint
   * only (a slot is claimed by a compareExchange from the free word seen).
   */
  readonly #freed = new Int32Array(FREED_KEPT);
  #freedCount = 0;

  constructor(t: SlabHost, state: SlotState, inlineWords: number, refOffset: number) {
    const w = t.words;
    this.#t = t;
    this.#state = state;
    this.#w = w;
    this.slots = w[H_SLAB_SLOTS] as number;
    this.#ix = w[H_DIRECTORY] as number;
    this.#seqs = w[H_DIRECTORY_SEQS] as number;
    this.stripes = t.stripes;
    this.perStripe = t.slotsPerStripe;
    this.#mask = this.perStripe - 1;
    this.#homeShift = 32 - Math.max(6, Math.log2(this.perStripe));
    this.#inlineWords = inlineWords;
    this.#refOffset = refOffset;
    // Atomics.add: each view gets its own number, whichever thread opens it. The golden ratio
    // spreads the starting points of the first views over the slots (the first one starts at 0).
    const view = Atomics.add(w, H_SLAB_CURSORS, 1);
    this.#cursor = Math.floor(((view * 0.6180339887498949) % 1) * this.slots);
  }

  /** The directory position (entry number) of the home of a key of hash `hash`: the first of its chain. */
  home(hash: number): number {
    const stripe = stripeOfHash(hash, this.stripes);
    const home = Math.imul(hash, 0x9e3779b1) >>> this.#homeShift;
    return stripe * this.perStripe + (home & this.#mask);
  }

  /** The directory position at probe step `i` of the chain that starts at `first` (wrapping inside its stripe). */
  probe(first: number, i: number): number {
    return first - (first & this.#mask) + ((first + i) & this.#mask);
  }

  /** The word index of the directory entry at position `pos`. */
  entryWord(pos: number): number {
    return this.#ix + pos;
  }

  /** The directory entry at position `pos` (an Atomics.load: acquire, see find). */
  entry(pos: number): number {
    return Atomics.load(this.#w, this.#ix + pos);
  }

  /**
   * Lock-free lookup of the key in the table's encoder (`bytes` long, hash `hash`): its slot (and
   * sets `foundCtrl`), or -1 when the key is not in the table.
   */
  find(bytes: number, hash: number): number {
    const t = this.#t;
    const w = this.#w;
    const first = this.home(hash);
    for (let i = 0; i < this.perStripe; i++) {
      // Atomics.load (acquire): a REF entry is placed after its slot's hash and key were written.
      const e = Atomics.load(w, this.#ix + this.probe(first, i));
      const state = e & 3;
      if (state === D_EMPTY) break;
      if (state !== D_REF || !tagMatches(e, hash)) continue;
      const slot = slotOfRef(e);
      const base = t.base(slot);
      // Atomics.load (acquire): if we see LIVE we also see the key words written before it.
      const ctrl = Atomics.load(w, base + S_CTRL);
      if ((ctrl & 3) !== LIVE || !t.keyEquals(base, bytes, hash)) continue;
      // Re-read ctrl: unchanged means the key compared above belonged to this incarnation. A
      // LIVE slot with our key is our key's one copy, whichever entry led here. Its state the
      // reclaim marker: finish that reclaim (its thread may have died) and look again.
      const changed = Atomics.load(w, base + S_CTRL) !== ctrl;
      if (changed || this.#state.isDead(w, base)) {
        if (!changed) t.finishReclaim(base, ctrl);
        i = -1;
        continue;
      }
      this.foundCtrl = ctrl;
      return slot;
    }
    return -1;
  }

  /**
   * Inserts the key held in the table's encoder (`bytes` long, hash `hash`). Returns its slot
   * (and sets `ctrl`), TABLE_FULL, or RETRY (look the key up again).
   *
   * No key ever gets a second live copy, whichever step of whichever inserter stalls (for less
   * than the table's reuseAfterMs, insert.ts): two inserters of one key each place an entry in
   * the key's chain before re-scanning it, so the later one to place sees the other's entry, and
   * through it the other's claim or copy, as a HASHED table's inserters see each other's slots.
   */
  insert(bytes: number, hash: number): number {
    const t = this.#t;
    const w = this.#w;
    const nowMs = Math.floor(processNow());
    // 1. Claim a free slot (the next one after this thread's last).
    const slot = this.claimSlot(nowMs);
    if (slot < 0) return TABLE_FULL;
    const base = t.base(slot);
    const from = this.#from;
    const claim = this.#claim;
    const gen = (from & 3) === BUSY ? (from >>> 2) ^ 0x2aaaaaaa : (from >>> 2) + 1;
    // 2. A slot that held a key (TOMB) or an expired claim may still have an entry: clear it.
    // Its hash is the one that entry was placed for (written before it, and only by a claimer).
    if ((from & 3) !== EMPTY) this.clearEntry(slot, Atomics.load(w, base + S_HASH), claim);
    // Atomics.store of the hash (seq-cst), then the key: both before the entry that points here.
    Atomics.store(w, base + S_HASH, hash);
    if (!writeKey(t, base, bytes, this.#inlineWords, this.#refOffset)) {
      this.#abandon(slot, claim, gen, -1);
      return TABLE_FULL;
    }
    // 3. Place our entry at the first free position of the chain (EMPTY or TOMB).
    const first = this.home(hash);
    const S = this.perStripe;
    const ref = refWord(slot, hash);
    let pos = -1;
    for (let i = 0; i < S; i++) {
      const at = this.#ix + this.probe(first, i);
      // Atomics.load: any word will do, the placement is a compareExchange from exactly it.
      const e = Atomics.load(w, at);
      if ((e & 3) === D_REF) continue;
      // compareExchange from the free word seen (seq-cst): fails if it was taken or cleared since.
      if (Atomics.compareExchange(w, at, e, ref) === e) {
        pos = i;
        if ((e & 3) === D_TOMB) t.count(first, C_TOMBS, -1);
        break;
      }
      i--; // look at the same position again
    }
    if (pos < 0) {
      this.#abandon(slot, claim, gen, -1);
      return RETRY_AFTER_FULL;
    }
    // 4. Re-scan the chain for the same key inserted (or being inserted) elsewhere.
    for (let i = 0; i < S; i++) {
      if (i === pos) continue;
      // Atomics.load (seq-cst): after our entry's placement in the total order, so an inserter of
      // the same key that placed its entry after this load sees ours in its own re-scan.
      const e = Atomics.load(w, this.#ix + this.probe(first, i));
      const state = e & 3;
      if (i < pos && state !== D_REF) {
        // A free position before ours: it was taken when we placed ours (we take the first free
        // one), and freed since. A compaction may be turning it EMPTY, which would cut our entry
        // off from its chain (slab-sweep.ts): give ours up and insert again.
        this.#abandon(slot, claim, gen, pos);
        return RETRY;
      }
      if (state === D_EMPTY) break;
      if (state !== D_REF || !tagMatches(e, hash)) continue;
      const other = slotOfRef(e);
      if (other === slot) continue;
      const otherBase = t.base(other);
      // Atomics.load (seq-cst, acquire): an entry is placed after its slot's hash and key; if we
      // see LIVE we also see the key words written before it. Judged as insert.ts's re-scan does.
      const c = Atomics.load(w, otherBase + S_CTRL);
      const judged = judgeOther(t, otherBase, c, bytes, hash);
      if (judged === OTHER_COPY) {
        this.#abandon(slot, claim, gen, pos);
        return RETRY; // the other copy wins; find() returns it
      }
      if (judged === OTHER_PASS) continue;
      if (judged === OTHER_CHANGED) {
        i--; // look at the entry again
        continue;
      }
      if (i < pos) {
        // An earlier entry's claim for what may be the same key wins; wait for it and start over.
        this.#abandon(slot, claim, gen, pos);
        awaitClaim(t, otherBase, c);
        return RETRY;
      }
      // A later one yields to ours; wait until it has (or it expires), then look at it again. A
      // claim can be seen at two positions: a stale entry of its slot (its claimer clears that one
      // first) and its own. So the wait also ends when this entry changes: a claimer that placed
      // its own entry before ours would otherwise wait for us while we wait for it, until the
      // claim timeout (reasoned by an attack; no reproducer).
      this.#awaitEntry(this.#ix + this.probe(first, i), e, otherBase, c);
      i--;
    }
    // 5. Fresh state, then publish (insert.ts, step 4: the same reasons). Our publish failing
    // (claim cancelled or taken over) leaves our entry pointing at a slot that is no longer ours:
    // its next claimer clears it.
    t.noteFloor(); // after the scans that found the key missing: a reclaim's floor reaches initSlot
    this.#state.initSlot(w, base, gen & PAYLOAD_MASK);
    if (Atomics.compareExchange(w, base + S_CTRL, claim, ctrlWord(LIVE, gen)) !== claim) return RETRY;
    t.count(slot, C_LIVE, 1);
    if (pos !== 0) t.count(first, C_DISPLACED, pos);
    this.ctrl = ctrlWord(LIVE, gen);
    return slot;
  }

  /**
   * Claims a free slot for an insert at the reading `nowMs`: one this thread's sweeps freed
   * lately, else the first one from this thread's cursor that is EMPTY, TOMB, or a claim older
   * than reuseAfterMs (see the body for how far it looks). Returns the slot (its word before the
   * claim in #from, our claim word in #claim), or -1: the table is full of keys that are not idle
   * (or of claims).
   */
  claimSlot(nowMs: number): number {
    const t = this.#t;
    const w = this.#w;
    while (this.#freedCount > 0) {
      const slot = this.#freed[--this.#freedCount] as number;
      // Atomics.load, then a compareExchange from exactly that word (as below).
      const c = Atomics.load(w, t.base(slot) + S_CTRL);
      if (((c & 3) === EMPTY || (c & 3) === TOMB) && this.#claimFrom(slot, c)) return slot;
    }
    const R = this.slots;
    const window = Math.min(R, SEARCH_WINDOW);
    let found = this.#search(window, nowMs);
    // None near the cursor. While fewer than maxKeys keys are live, a free slot is somewhere
    // (a sixteenth of the slots are spare): look further, the whole table at worst. At maxKeys
    // live keys (the counters' gauge) the table may refuse, as a HASHED table refuses a key
    // whose stripe is full: it reclaims the idle keys of the next window and takes one of
    // their slots, or answers full, reading one window, not the whole table.
    if (found < 0) {
      const g = t.gauges();
      if (g.liveKeys < g.maxKeys) found = this.#search(R - window, nowMs);
    }
    return found >= 0 ? found : this.#reclaimNext(window);
  }

  /**
   * The first free slot among the next `count` from the cursor (EMPTY, TOMB, or a claim older
   * than reuseAfterMs at `nowMs`), claimed; -1 when none.
   */
  #search(count: number, nowMs: number): number {
    const t = this.#t;
    const R = this.slots;
    for (let n = 0; n < count; n++) {
      const slot = this.#cursor;
      this.#cursor = slot + 1 === R ? 0 : slot + 1;
      // Atomics.load: any word will do, the claim is a compareExchange from exactly it.
      const c = Atomics.load(this.#w, t.base(slot) + S_CTRL);
      const state = c & 3;
      if (state === LIVE || (state === BUSY && claimAge(c, nowMs) <= t.reuseAfterMs)) continue;
      if (this.#claimFrom(slot, c)) return slot;
    }
    return -1;
  }

  /**
   * Reclaims every idle key among the next `count` slots from the cursor; claims the first slot
   * freed (-1: none) and keeps the others for the next inserts.
   */
  #reclaimNext(count: number): number {
    const t = this.#t;
    const R = this.slots;
    let first = -1;
    for (let n = 0; n < count; n++) {
      const slot = this.#cursor;
      this.#cursor = slot + 1 === R ? 0 : slot + 1;
      const base = t.base(slot);
      // Atomics.load: the LIVE word the reclaim starts from (reclaimLive checks it again by its compareExchange).
      const c = Atomics.load(this.#w, base + S_CTRL);
      if ((c & 3) !== LIVE) continue;
      const tomb = t.reclaimLive(base, c);
      if ((tomb & 3) !== TOMB) continue;
      if (first < 0 && this.#claimFrom(slot, tomb)) first = slot;
      else this.noteFreed(slot);
    }
    return first;
  }

  /** awaitClaim (insert.ts) that also ends when the directory word at `at` is no longer `entry`. */
  #awaitEntry(at: number, entry: number, base: number, claim: number): void {
    const w = this.#w;
    for (let spins = 0; ; spins++) {
      // Atomics.load of both words: any change ends the wait, and the caller looks again.
      if (Atomics.load(w, base + S_CTRL) !== claim || Atomics.load(w, at) !== entry) return;
      if ((spins & 1023) === 1023 && claimAge(claim, Math.floor(processNow())) > this.#t.claimTimeoutMs) return;
    }
  }

  /**
   * Claims `slot` from its word `c`: compareExchange from the exact word seen, so
   * two claimers cannot both win. One stalled after it holds the slot until its publish, or until
   * reuseAfterMs (insert.ts). True if it did (and #from, #claim say from what, with what).
   */
  #claimFrom(slot: number, c: number): boolean {
    const at = this.#t.base(slot) + S_CTRL;
    // Stamped with a reading taken now: the insert's first one may be long past (a search of the
    // table, a clock that moved), and every claim would then land old (found by the explorer:
    // slab-compaction refused a new key as if the table were full, every free slot given back).
    const claim = ctrlWord(BUSY, Math.floor(processNow()) & CLAIM_STAMP_MASK);
    if (Atomics.compareExchange(this.#w, at, c, claim) !== c) return false;
    // A claim that landed already old is given back before anything is written (insert.ts,
    // bornOld): the slot free again, as a tombstone (a stale entry may still point at it).
    if (bornOld(this.#t, claim)) {
      const gen = (c & 3) === BUSY ? (c >>> 2) ^ 0x2aaaaaaa : (c >>> 2) + 1;
      // compareExchange from our claim: if another thread took it over meanwhile, it is theirs.
      Atomics.compareExchange(this.#w, at, claim, ctrlWord(TOMB, gen));
      return false;
    }
    this.#from = c;
    this.#claim = claim;
    return true;
  }

  /** Notes that this thread freed `slot` (a sweep): the next inserts take it first. */
  noteFreed(slot: number): void {
    if (this.#freedCount < FREED_KEPT) this.#freed[this.#freedCount++] = slot;
  }

  /**
   * Clears the entry of `slot` in the chain of hash `hash`, if there is one: REF -> TOMB. Called
   * only by the thread holding the slot's claim (BUSY, `claim`), the one thread that writes
   * entries pointing at it, so the REF word found cannot be another incarnation's: unless this
   * thread stalled past the table's reuseAfterMs and its claim was taken over (its one timing
   * assumption, insert.ts), and the slot's next key placed the same REF word at the same
   * position. The claim is looked at again right before the compareExchange, which leaves that
   * stall only the two steps between them (found by the explorer: a sweep stalled 60 s after
   * claiming a freed slot cleared the entry of the key an insert had put there since).
   */
  clearEntry(slot: number, hash: number, claim: number): void {
    const w = this.#w;
    const first = this.home(hash);
    const ref = refWord(slot, hash);
    for (let i = 0; i < this.perStripe; i++) {
      const pos = this.probe(first, i);
      // Atomics.load: an entry of ours is reachable from its home without crossing an EMPTY one
      // (a compaction keeps every REF's chain, slab-sweep.ts), so the search stops there.
      const e = Atomics.load(w, this.#ix + pos);
      if (e === D_EMPTY) return;
      if (e !== ref) continue;
      // Atomics.load of the slot's ctrl: still our claim, so the REF is still the stale one.
      if (Atomics.load(w, this.#t.base(slot) + S_CTRL) !== claim) return;
      this.#tombstone(pos, ref);
      return;
    }
  }

  /**
   * REF `ref` at directory position `pos` -> a new tombstone. (The gauges' displacement is that of
   * LIVE slots: counted at the publish, taken back by the reclaim, SlotTable.finishReclaim.)
   */
  #tombstone(pos: number, ref: number): void {
    const w = this.#w;
    const stripe = (pos / this.perStripe) | 0;
    // Atomics.add: the stripe's next tombstone number, never the same twice (30 bits).
    const tomb = tombWord(Atomics.add(w, this.#seqs + stripe, 1));
    // compareExchange from our REF: only this slot's claimer writes over it (see clearEntry).
    if (Atomics.compareExchange(w, this.#ix + pos, ref, tomb) === ref) this.#t.count(pos, C_TOMBS, 1);
  }

  /**
   * How far the entry of the LIVE slot `slot` (its key's hash `hash`) is from the key's home: the
   * probe step at which a lookup finds it, or 0 when no entry of it is found. While the slot is
   * LIVE its entry stays where it was placed (only a claimer of the slot clears it).
   */
  displacementOf(slot: number, hash: number): number {
    const first = this.home(hash);
    const ref = refWord(slot, hash);
    for (let i = 0; i < this.perStripe; i++) {
      // Atomics.load: the entry was placed before the slot was published LIVE.
      const e = Atomics.load(this.#w, this.#ix + this.probe(first, i));
      if (e === ref) return i;
      if (e === D_EMPTY) return 0;
    }
    return 0;
  }

  /**
   * Gives up our claim of `slot` (insert.ts's #abandon): our entry, placed at probe step `pos`
   * (-1: none yet), becomes a tombstone, then the slot EMPTY of generation `gen` (no entry points
   * at it any more), never the word it was before our claim.
   */
  #abandon(slot: number, claim: number, gen: number, pos: number): void {
    const w = this.#w;
    const base = this.#t.base(slot);
    if (pos >= 0) {
      // The hash we wrote (the slot is ours): our entry is at step pos of its chain.
      const hash = w[base + S_HASH] as number;
      this.#tombstone(this.probe(this.home(hash), pos), refWord(slot, hash));
    }
    // compareExchange from our claim: if it was cancelled meanwhile, the slot stays held until
    // reuseAfterMs (we may have written it); if taken over, we leave the new owner alone.
    Atomics.compareExchange(w, base + S_CTRL, claim, ctrlWord(EMPTY, gen));
  }
}

/** Slots freed by a thread's sweeps that it keeps for its next inserts (SlabDirectory's #freed). */
const FREED_KEPT = 256;
/**
 * Slots an insert looks at from its cursor before it asks whether the table has room, and the
 * slots whose idle keys it reclaims when it has none (SlabDirectory.claimSlot).
 */
const SEARCH_WINDOW = 256;

/**
 * Returned by SlabDirectory.insert when the key's directory stripe had no free entry: the table
 * reclaims what it can there and retries, or answers TABLE_FULL (SlotTable.locate).
 */
export const RETRY_AFTER_FULL = -3;
export { RETRY };
