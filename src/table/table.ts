import { KeyEncoder, keyWords } from './hash.js';
import {
  BUSY, C_DISPLACED, C_LIVE, C_TOMBS, ctrlWord, EMPTY, H_CLAIM_TIMEOUT_MS, H_HASH_MODE, H_REUSE_AFTER_MS, H_HASH_SEED, H_HASH_VALUE,
  H_MAX_KEY_BYTES, H_MAX_KEYS, H_SLOT_WORDS, H_SLOTS_PER_STRIPE, H_STRIPES, HEADER_WORDS, LIVE, S_CTRL, S_HASH, S_KEY_BYTES,
  stripeOfHash, TOMB, SLAB, H_LAYOUT,
} from './layout.js';
import { KeyHeap } from './key-heap.js';
import { RECLAIMED_ELSEWHERE, StripeSweeper } from './compaction.js';
import { claimAge, RETRY, SlotInserter, TABLE_FULL } from './insert.js';
import { TableCounters } from './table-counters.js';
import { SlabDirectory, RETRY_AFTER_FULL } from './slab-directory.js';
import { SlabSweeper } from './slab-sweep.js';
import { ReclaimFloor } from './reclaim-floor.js';
import { checkTableBuffer, hasKeyHeap, inlineKeyWordsOf, keyOffsetOf, keyRefOffsetOf, stateOffsetOf } from './table-buffer.js';

/**
 * What the table needs to know about the state stored in a slot. The table owns keys and slots;
 * the algorithm owns the meaning of the state words, including the reclaim marker.
 */
export interface SlotState {
  /**
   * Writes the initial (fresh) state of a slot that is about to be published. Called with the
   * slot claimed (BUSY) by this thread. Must read the clock *after* the claim, so the state it
   * writes is later than anything the slot's previous key ever held (see docs/design.md, ABA).
   * `generation` is the payload its LIVE ctrl word will carry.
   */
  initSlot(words: Int32Array, base: number, generation: number): void;
  /** Whether the slot's state is the reclaim marker: a reclaim passed its linearisation point. */
  isDead(words: Int32Array, base: number): boolean;
  /**
   * If the slot's key is strictly idle (its state equals a fresh key's, and has since before
   * now), replaces its state with the reclaim marker in one compare-and-swap and returns
   * RETIRED; ALREADY_DEAD if the marker is there; else NOT_IDLE. Before that compareExchange it
   * raises `floor` to the reading it judged the key idle at (reclaim-floor.ts).
   */
  retire(words: Int32Array, base: number, floor: ReclaimFloor): number;
  /**
   * A reclaim judged a key idle at the reading `ms`: from now on this instance decides at no
   * earlier reading, and `initSlot` writes no fresher state (reclaim-floor.ts). The table calls
   * it before `initSlot` and when it finds a key without the thread's cache, once per move of
   * the floor.
   */
  raiseTo(ms: number): void;
}

/** `SlotState.retire` results. */
export const RETIRED = 1;
export const ALREADY_DEAD = 2;
/** Returned by `SlotState.retire` for a key that still holds quota (or could not be checked). */
export const NOT_IDLE = 0;
export { TABLE_FULL } from './insert.js';

/** Table-wide counts returned by `scan()`. */
export interface TableCounts {
  live: number;
  tombstones: number;
  /** BUSY slots: inserts in progress, and dead or cancelled claims not yet reused. */
  claimed: number;
}

/**
 * A striped open-addressing hash table of fixed-size slots in a SharedArrayBuffer.
 *
 * Thread-safety: every method may run on any thread at the same time as any other method on
 * any thread, over the same buffer. No method takes a lock. An instance also holds per-thread
 * scratch memory, so one instance must not be shared between threads (attach one per thread).
 */
export class SlotTable {
  readonly words: Int32Array;
  readonly stripes: number;
  readonly slotsPerStripe: number;
  readonly slotWords: number;
  readonly maxKeyBytes: number;
  readonly claimTimeoutMs: number;
  /** How old a claim or a lock word must be before an insert or a reclaim takes it over (layout.ts, H_REUSE_AFTER_MS). */
  readonly reuseAfterMs: number;
  /** Offset of a slot's state words from its base (right after the slot's header words). */
  readonly stateOffset: number;
  /** Offset of a slot's key words from its base (after the state words). */
  readonly keyOffset: number;
  readonly encoder: KeyEncoder;
  /** Long keys' tails (null when every key fits its slot: maxKeyBytes <= INLINE_KEY_BYTES). */
  readonly heap: KeyHeap | null;
  /** Key words a slot holds; a longer key keeps the rest in the heap record of its slot. */
  readonly #inlineWords: number;
  /** Offset of a slot's reference word to its heap record (with a heap). */
  readonly #refOffset: number;
  /** ctrl word seen when `locate` last returned a slot: the cache validates against it. */
  foundCtrl = 0;
  /** Whether the slot `locate` last returned was inserted by that call (the key was new to the table). */
  foundNew = false;
  /**
   * Inserts on this view that lost a race and looked the key up again (a claim or an entry taken
   * first, a copy of the key inserted meanwhile): counted in `report`'s casRetries. Per thread, plain.
   */
  retries = 0;
  readonly #stripeMask: number;
  /** The home slot is the top bits of the re-mixed hash: 6 of them, or log2 of a longer stripe. */
  readonly #homeShift: number;
  readonly #hashMode: number;
  readonly #hashValue: number;
  readonly #hashSeed: number;
  readonly #state: SlotState;
  /** Set by a lookup that missed, for the insert that follows (see #find). Per thread. */
  #missFree = -1;
  #missWord = 0;
  /** This thread's sweeps and compactions (compaction.ts). */
  readonly #sweeper: StripeSweeper;
  /** This thread's inserts (insert.ts). */
  readonly #inserter: SlotInserter;
  /** The gauges' counters (table-counters.ts). */
  readonly #counters: TableCounters;
  /** The reclaim floor (reclaim-floor.ts): raised by this thread's reclaims, read by its lookups. */
  readonly #floor: ReclaimFloor;
  /** A SLAB table's directory and its sweeps (slab-directory.ts, slab-sweep.ts); null in a HASHED table. */
  readonly #slab: SlabDirectory | null;
  readonly #slabSweeper: SlabSweeper | null;

  /**
   * Opens the table in `buffer`, with `heap` its key heap when it has one (`hasKeyHeap`; the
   * caller checked that it is one, see checkKeyHeap).
   */
  constructor(buffer: SharedArrayBuffer, state: SlotState, heap: SharedArrayBuffer | null = null) {
    const words = checkTableBuffer(buffer);
    if (hasKeyHeap(words) !== (heap !== null)) {
      throw new TypeError(hasKeyHeap(words) ? 'this table keeps long keys in a key heap: pass its heap' : 'this table has no key heap');
    }
    this.heap = heap === null ? null : new KeyHeap(heap);
    this.#inlineWords = inlineKeyWordsOf(words);
    this.#refOffset = keyRefOffsetOf(words);
    this.words = words;
    this.stripes = words[H_STRIPES] as number;
    this.slotsPerStripe = words[H_SLOTS_PER_STRIPE] as number;
    this.slotWords = words[H_SLOT_WORDS] as number;
    this.maxKeyBytes = words[H_MAX_KEY_BYTES] as number;
    this.claimTimeoutMs = words[H_CLAIM_TIMEOUT_MS] as number;
    this.reuseAfterMs = words[H_REUSE_AFTER_MS] as number;
    this.stateOffset = stateOffsetOf(words);
    this.keyOffset = keyOffsetOf(words);
    this.#stripeMask = this.slotsPerStripe - 1;
    this.#homeShift = 32 - Math.max(6, Math.log2(this.slotsPerStripe));
    this.#hashMode = words[H_HASH_MODE] as number;
    this.#hashValue = words[H_HASH_VALUE] as number;
    this.#hashSeed = words[H_HASH_SEED] as number;
    this.encoder = new KeyEncoder(this.maxKeyBytes, this.#hashSeed);
    this.#state = state;
    this.#floor = new ReclaimFloor(words);
    this.#counters = new TableCounters(words, this.slotsPerStripe);
    this.#sweeper = new StripeSweeper(this);
    this.#inserter = new SlotInserter(this, state, this.#inlineWords, this.#refOffset);
    this.#slab = words[H_LAYOUT] === SLAB ? new SlabDirectory(this, state, this.#inlineWords, this.#refOffset) : null;
    this.#slabSweeper = this.#slab === null ? null : new SlabSweeper(this, this.#slab);
  }

  /**
   * After the loads that found a key, or found it missing and claimed a slot for it: when the
   * reclaim floor moved since this thread last looked, the slot hooks raise this instance's
   * readings to it (reclaim-floor.ts). One Atomics.load when it has not.
   */
  noteFloor(): void {
    const ms = this.#floor.moved();
    if (ms === ms) this.#state.raiseTo(ms); // not NaN: the floor moved
  }

  /** Counts a transition of `slot` (TableCounters.count), right after the compareExchange that made it: once each. */
  count(slot: number, word: number, delta: number): void {
    this.#counters.count(slot, word, delta);
  }

  /** The slot whose first word is `base`. */
  #slotAt(base: number): number {
    return ((base - HEADER_WORDS) / this.slotWords) | 0;
  }

  /** How far the LIVE slot at `base` is from its key's home slot (its hit probe is one more). */
  #displacement(base: number): number {
    const slot = this.#slotAt(base);
    // A plain read of the hash: the caller holds the slot LIVE (its hash is written before the
    // publish and never while LIVE), or has just moved it from LIVE and read nothing since.
    return (slot - this.homeSlot(this.words[base + S_HASH] as number)) & this.#stripeMask;
  }

  /** Number of slots in the table. */
  get capacity(): number {
    return this.#slab === null ? this.stripes * this.slotsPerStripe : this.#slab.slots;
  }

  /**
   * Hash of the key currently in `encoder` (the encoder hashed it as it encoded it). A forced
   * hash (tests) makes every key collide.
   */
  hashEncoded(): number {
    return this.#hashMode === 1 ? this.#hashValue : this.encoder.hash;
  }

  /**
   * Finds the slot of the key held in `encoder` (`bytes` long, hash `hash`), inserting it if it
   * is absent. Returns the slot index (and sets `foundCtrl`), or `TABLE_FULL`.
   */
  locate(bytes: number, hash: number): number {
    if (this.#slab !== null) return this.#locateSlab(this.#slab, bytes, hash);
    for (;;) {
      const found = this.#find(bytes, hash);
      if (found >= 0) {
        this.foundNew = false;
        this.noteFloor();
        return found;
      }
      const free = this.#missFree;
      this.#missFree = -1;
      const inserted = this.#inserter.insert(bytes, hash, free, this.#missWord);
      if (inserted !== RETRY) {
        if (inserted >= 0) {
          this.foundCtrl = this.#inserter.ctrl;
          this.foundNew = true;
        }
        return inserted;
      }
      this.retries++;
    }
  }

  /** `locate` in a SLAB table. */
  #locateSlab(slab: SlabDirectory, bytes: number, hash: number): number {
    for (;;) {
      const found = slab.find(bytes, hash);
      if (found >= 0) {
        this.foundCtrl = slab.foundCtrl;
        this.foundNew = false;
        this.noteFloor();
        return found;
      }
      const inserted = slab.insert(bytes, hash);
      if (inserted >= 0) {
        this.foundCtrl = slab.ctrl;
        this.foundNew = true;
        return inserted;
      }
      if (inserted === TABLE_FULL) return TABLE_FULL;
      // The key's directory stripe had no free entry: free what can be freed there, else full.
      if (inserted === RETRY_AFTER_FULL) {
        if (!(this.#slabSweeper as SlabSweeper).reclaimStripe(this.stripeOf(hash))) return TABLE_FULL;
      } else this.retries++;
    }
  }

  /**
   * Finds the slot of the key held in `encoder` without inserting it: the slot (and sets
   * `foundCtrl`), or -1 when the key is not in the table. For caches that only read.
   */
  find(bytes: number, hash: number): number {
    this.foundNew = false;
    let found: number;
    if (this.#slab !== null) {
      found = this.#slab.find(bytes, hash);
      if (found >= 0) this.foundCtrl = this.#slab.foundCtrl;
    } else found = this.#find(bytes, hash);
    if (found >= 0) this.noteFloor();
    return found;
  }

  /** The slot's first word index. */
  base(slot: number): number {
    return HEADER_WORDS + slot * this.slotWords;
  }

  /** The stripe a key of hash `hash` lives in (every slot of its probe chain is there). */
  stripeOf(hash: number): number {
    return stripeOfHash(hash, this.stripes);
  }

  /** The home slot of a key of hash `hash`: the first slot of its probe chain. */
  homeSlot(hash: number): number {
    // Stripe from the hash's top bits, home slot from its re-mixed top bits: two independent picks.
    const stripe = stripeOfHash(hash, this.stripes);
    const home = Math.imul(hash, 0x9e3779b1) >>> this.#homeShift; // top bits: 6, or log2 of longer stripes
    return stripe * this.slotsPerStripe + (home & this.#stripeMask);
  }

  /** The position in its stripe of the home slot of a key of hash `hash` (for compaction.ts). */
  homeInStripe(hash: number): number {
    return this.homeSlot(hash) & this.#stripeMask;
  }

  /** The slot at probe position `i` from `first` (linear probing, wrapping inside the stripe). */
  probeSlot(first: number, i: number): number {
    const stripeStart = first - (first & this.#stripeMask);
    return stripeStart + ((first + i) & this.#stripeMask);
  }

  /** Whether the LIVE slot at `base` holds the key in `encoder` (`bytes` long, hash `hash`). */
  keyEquals(base: number, bytes: number, hash: number): boolean {
    const w = this.words;
    // Plain reads of hash and key are safe: the caller re-reads ctrl afterwards, and a LIVE
    // slot's key words (its record's too) are written before the publishing CAS and never
    // change while it is LIVE.
    if (w[base + S_HASH] !== hash || w[base + S_KEY_BYTES] !== bytes) return false;
    const key = this.encoder.words;
    const n = keyWords(bytes);
    const inline = Math.min(n, this.#inlineWords);
    const at = base + this.keyOffset;
    for (let i = 0; i < inline; i++) if (w[at + i] !== key[i]) return false;
    return n === inline || this.#tailEquals(w[base + this.#refOffset] as number, n);
  }

  /**
   * Whether the heap record `ref` holds the encoded key's words from the slot's last one to `n`.
   * The slot may have changed since its reference was read (the caller re-reads its ctrl): a
   * reference is always 0 or a record's index, and a record too short to hold the tail fails.
   */
  #tailEquals(ref: number, n: number): boolean {
    const tail = n - this.#inlineWords;
    const h = (this.heap as KeyHeap).view(ref + 1 + tail);
    if (ref === 0 || !((h[ref] as number) >= tail)) return false;
    const key = this.encoder.words;
    for (let i = 0; i < tail; i++) if (h[ref + 1 + i] !== key[this.#inlineWords + i]) return false;
    return true;
  }

  /**
   * Lock-free lookup. Returns the slot, or -1 when the key is not in the table; then
   * `#missFree`/`#missWord` hold the first free position of the chain and its ctrl word, for the
   * insert that follows (-1: none, or a claim came first, which the insert may take over).
   */
  #find(bytes: number, hash: number): number {
    const w = this.words;
    const first = this.homeSlot(hash);
    let free = -1;
    let freeWord = 0;
    let claimFirst = false;
    for (let i = 0; i < this.slotsPerStripe; i++) {
      const slot = this.probeSlot(first, i);
      const base = this.base(slot);
      // Atomics.load (acquire): if we see LIVE we also see the key words written before it.
      const ctrl = Atomics.load(w, base + S_CTRL);
      const state = ctrl & 3;
      if (state !== LIVE) {
        if (free < 0) {
          if (state === BUSY) claimFirst = true;
          else {
            free = i;
            freeWord = ctrl;
          }
        }
        if (state === EMPTY) break;
        continue;
      }
      if (!this.keyEquals(base, bytes, hash)) continue;
      // Re-read ctrl: unchanged means the key compared above belonged to this incarnation.
      // ctrl then tat: a LIVE slot whose tat is DEAD is being reclaimed. Finish that for the
      // reclaimer (it may have died) and look again: the key is gone.
      const changed = Atomics.load(w, base + S_CTRL) !== ctrl;
      if (changed || this.#state.isDead(w, base)) {
        if (!changed) this.finishReclaim(base, ctrl);
        i = -1;
        free = -1;
        claimFirst = false;
        continue;
      }
      this.foundCtrl = ctrl;
      return slot;
    }
    this.#missFree = claimFirst ? -1 : free;
    this.#missWord = freeWord;
    return -1;
  }

  /** Completes a reclaim whose `tat` is already DEAD: LIVE(gen) -> TOMB(gen). True if this call did. */
  finishReclaim(base: number, ctrl: number): boolean {
    // The displacement before the compareExchange: once TOMB, the slot may be claimed and its
    // hash rewritten. (A SLAB table counts its directory: the entry stays until it is cleared.)
    // (A plain read of a LIVE slot's hash, as in #displacement.)
    const hash = this.words[base + S_HASH] as number;
    const displaced = this.#slab === null ? this.#displacement(base) : this.#slab.displacementOf(this.#slotAt(base), hash);
    // compareExchange from the exact LIVE word: succeeds once, for this incarnation only.
    if (Atomics.compareExchange(this.words, base + S_CTRL, ctrl, ctrlWord(TOMB, ctrl >>> 2)) !== ctrl) return false;
    const slot = this.#slotAt(base);
    this.count(slot, C_LIVE, -1);
    if (this.#slab !== null) {
      // A SLAB table's tombstones are directory entries, made when the entry is cleared.
      if (displaced !== 0) this.count(this.#slab.home(hash), C_DISPLACED, -displaced);
      return true;
    }
    this.count(slot, C_TOMBS, 1);
    if (displaced !== 0) this.count(slot, C_DISPLACED, -displaced);
    return true;
  }

  /**
   * Reclaims the slot at `base`, whose ctrl word was loaded as the LIVE word `ctrl`, if its key is
   * idle. Order: the state's own retire (its reads and its compare-and-swap to the reclaim marker,
   * the linearisation point), then ctrl -> TOMB. Returns the tombstone word when this call made
   * it, RECLAIMED_ELSEWHERE when it retired the key but another thread finished the reclaim (or
   * the slot changed before this call's compareExchange), and 0 when it reclaimed nothing.
   */
  reclaimLive(base: number, ctrl: number): number {
    const outcome = this.#state.retire(this.words, base, this.#floor);
    if (outcome === NOT_IDLE) return 0;
    if (this.finishReclaim(base, ctrl)) return ctrlWord(TOMB, ctrl >>> 2);
    // ALREADY_DEAD: a reclaim already past its linearisation point (its thread may have died)
    // that another thread finished first; RETIRED: this call's reclaim, finished by another.
    return outcome === RETIRED ? RECLAIMED_ELSEWHERE : 0;
  }

  /** Age in ms of the claim in BUSY word `ctrl` at the reading `nowMs` (insert.ts). */
  claimAge(ctrl: number, nowMs: number): number {
    return claimAge(ctrl, nowMs);
  }

  /** Whether the claim in BUSY word `c` at `base` can never be published, cancelling it if it expired (SlotInserter.cancelExpired). */
  cancelExpired(base: number, c: number): boolean {
    return this.#inserter.cancelExpired(base, c);
  }

  /** Reclaims every idle key in the stripe of slot `first`, then compacts it; true if any slot was freed. */
  reclaimStripeOf(first: number): boolean {
    return this.#sweeper.sweepStripe((first / this.slotsPerStripe) | 0, -1, 0) !== 0;
  }

  /**
   * Reclaims every idle key in the table and every long-abandoned claim, and compacts every
   * stripe. Returns the count of slots freed (reclaimed keys and claims). See compaction.ts.
   */
  sweep(): number {
    return this.#slabSweeper === null ? this.#sweeper.sweep() : this.#slabSweeper.sweep();
  }

  /** Turns the tombstones of `stripe` that no key's probe chain crosses back into EMPTY slots; returns how many (compaction.ts). */
  compactStripe(stripe: number): number {
    return this.#slabSweeper === null ? this.#sweeper.compactStripe(stripe) : this.#slabSweeper.compactStripe(stripe);
  }

  /**
   * What every limiter's `stats()` reports about its table (it adds its own `casRetries` to the
   * table's lost insert races).
   * O(capacity); a snapshot that may race with writers.
   */
  report(casRetries: number): {
    liveKeys: number; maxKeys: number; capacity: number; tombstones: number; claimed: number; tableBytes: number; keyHeapBytes: number;
    casRetries: number;
  } {
    const c = this.scan();
    return {
      liveKeys: c.live, maxKeys: this.words[H_MAX_KEYS] as number, capacity: this.capacity, tombstones: c.tombstones,
      claimed: c.claimed, tableBytes: this.words.byteLength, keyHeapBytes: this.heap?.byteLength ?? 0, casRetries: casRetries + this.retries,
    };
  }

  /**
   * The table's gauges from its counters (layout.ts): O(COUNTER_CELLS), for every scrape. Live
   * keys count until their slot is reclaimed (idle or not), as in `report`; `probeMean` is a hit's
   * mean probe (1 at the home slot). Each count is exact once the transitions in progress end,
   * except that a thread terminated between a transition and its count leaves that one out
   * (`report` counts the slots themselves).
   */
  gauges(): { liveKeys: number; tombstones: number; probeMean: number; maxKeys: number; capacity: number } {
    const c = this.#counters.sums();
    const live = Math.max(c.live, 0);
    return {
      liveKeys: live, tombstones: Math.max(c.tombstones, 0), probeMean: live === 0 ? 0 : 1 + Math.max(c.displaced, 0) / live,
      maxKeys: this.words[H_MAX_KEYS] as number, capacity: this.capacity,
    };
  }

  /**
   * How many slots a lookup probes, for benchmarks: a hit (each live key: 1 at its home slot,
   * plus how far linear probing moved it), mean and largest; and a miss (from each slot taken as
   * a home, up to and including the first EMPTY slot, at most the stripe), mean and largest.
   * O(capacity); a snapshot.
   */
  probeLengths(): { mean: number; max: number; missMean: number; missMax: number } {
    if (this.#slabSweeper !== null) return this.#slabSweeper.probeLengths();
    const w = this.words;
    let n = 0;
    let sum = 0;
    let max = 0;
    for (let slot = 0; slot < this.capacity; slot++) {
      const base = this.base(slot);
      // Atomics.load of ctrl, then the hash (written before the publishing compareExchange).
      if ((Atomics.load(w, base + S_CTRL) & 3) !== LIVE) continue;
      const home = this.homeSlot(w[base + S_HASH] as number);
      const probes = ((slot - home) & this.#stripeMask) + 1; // both in one stripe: wraps inside it
      n++;
      sum += probes;
      if (probes > max) max = probes;
    }
    // Misses: walking each stripe backwards, the distance from each slot to the next EMPTY one.
    const S = this.slotsPerStripe;
    let missSum = 0;
    let missMax = 0;
    for (let start = 0; start < this.capacity; start += S) {
      let toEmpty = S; // no EMPTY slot in the stripe: a miss reads all of it
      for (let pass = 0; pass < 2; pass++) {
        for (let i = S - 1; i >= 0; i--) {
          const empty = (Atomics.load(w, this.base(start + i) + S_CTRL) & 3) === EMPTY;
          toEmpty = empty ? 1 : Math.min(S, toEmpty + 1);
          if (pass === 1) {
            missSum += toEmpty;
            if (toEmpty > missMax) missMax = toEmpty;
          }
        }
      }
    }
    return { mean: n === 0 ? 0 : sum / n, max, missMean: missSum / this.capacity, missMax };
  }

  /** Counts slots by state. O(capacity); a snapshot that may race with writers. */
  scan(): TableCounts {
    const slab = this.#slab !== null;
    // A SLAB table's tombstones are its directory's (a free slot is no tombstone, and the entry a
    // freed slot keeps until its next claimer or a sweep clears it counts as one then).
    const counts: TableCounts = { live: 0, tombstones: slab ? (this.#slabSweeper as SlabSweeper).tombstones() : 0, claimed: 0 };
    for (let slot = 0; slot < this.capacity; slot++) {
      const base = this.base(slot);
      const state = Atomics.load(this.words, base + S_CTRL) & 3;
      if (state === LIVE) {
        if (!this.#state.isDead(this.words, base)) counts.live++;
        else counts.tombstones++; // a reclaim past its linearisation point, not finished
      } else if (state === TOMB && !slab) counts.tombstones++;
      else if (state === BUSY) counts.claimed++;
    }
    return counts;
  }
}

