import { hashWords, KeyEncoder, keyWords } from './hash.js';
import {
  BUSY, C_DISPLACED, C_LIVE, C_TOMBS, CLAIM_CANCELLED, ctrlWord, EMPTY, H_CLAIM_TIMEOUT_MS, H_HASH_MODE, H_HASH_SEED, H_HASH_VALUE,
  H_MAX_KEY_BYTES, H_MAX_KEYS, H_SLOT_WORDS, H_SLOTS_PER_STRIPE, H_STRIPES, HEADER_WORDS, LIVE, S_CTRL, S_HASH, S_KEY_BYTES,
  CLAIM_STAMP_MASK, stripeOfHash, TOMB, PAYLOAD_MASK,
} from './layout.js';
import { KeyHeap } from './key-heap.js';
import { RECLAIMED_ELSEWHERE, StripeSweeper } from './compaction.js';
import { TableCounters } from './table-counters.js';
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
   * RETIRED; ALREADY_DEAD if the marker is there; else NOT_IDLE.
   */
  retire(words: Int32Array, base: number): number;
}

/** `SlotState.retire` results. */
export const RETIRED = 1;
export const ALREADY_DEAD = 2;
/** Returned by `SlotState.retire` for a key that still holds quota (or could not be checked). */
export const NOT_IDLE = 0;
/** Returned by `locate` when the key's stripe has no free or reclaimable slot. */
export const TABLE_FULL = -1;

/**
 * An expired claim, cancelled or not, may be taken over after this many claim timeouts (a dead
 * inserter's slot), counted from its claim stamp.
 *
 * The table's one timing assumption: no inserter stalls for that long between its claim and its
 * publish. One that did would still write its hash, key and initial state into the slot (it
 * learns that it lost the slot only when its publish fails), over those of the slot's next
 * occupant: that key's state would be reset, or the slot would read as a second copy of the
 * stalled inserter's key. The assumption binds at small timeouts: at claimTimeoutMs 1 it is 30 ms,
 * which a thread preempted on a host with more busy threads than cores can exceed.
 * Stamps are ms modulo 2^29, so a claim word repeats only after 2^29 ms (about 6.2 days): a
 * publish stalled that long could land on a later claim of its slot that carries the same stamp.
 * 30x claimTimeoutMs is at most 30 minutes (MAX_CLAIM_TIMEOUT_MS), far below both that and the
 * ages the signed 29-bit difference tells apart (CLAIM_AGE_LIMIT); a dead claim left unswept looks
 * young again for half of every 6.2 days, which delays its reuse and nothing else.
 */
export const REUSE_AFTER_TIMEOUTS = 30;

/**
 * Claim ages from 2^28 ms (about 3.1 days) up read as negative: a claim stamped after the reading
 * that judges it. 30x the longest claimTimeoutMs (60,000) is 30 minutes, well inside.
 */
const CLAIM_AGE_LIMIT = 2 ** 28;

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
  /** The gauges' counters (table-counters.ts). */
  readonly #counters: TableCounters;

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
    this.stateOffset = stateOffsetOf(words);
    this.keyOffset = keyOffsetOf(words);
    this.#stripeMask = this.slotsPerStripe - 1;
    this.#homeShift = 32 - Math.max(6, Math.log2(this.slotsPerStripe));
    this.#hashMode = words[H_HASH_MODE] as number;
    this.#hashValue = words[H_HASH_VALUE] as number;
    this.#hashSeed = words[H_HASH_SEED] as number;
    this.encoder = new KeyEncoder(this.maxKeyBytes);
    this.#state = state;
    this.#counters = new TableCounters(words, this.slotsPerStripe);
    this.#sweeper = new StripeSweeper(this, REUSE_AFTER_TIMEOUTS);
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
    return (slot - this.#home(this.words[base + S_HASH] as number)) & this.#stripeMask;
  }

  /** Number of slots in the table. */
  get capacity(): number {
    return this.stripes * this.slotsPerStripe;
  }

  /** Hash of the key currently in `encoder`. A forced hash (tests) makes every key collide. */
  hashEncoded(bytes: number): number {
    return this.#hashMode === 1 ? this.#hashValue : hashWords(this.encoder.words, keyWords(bytes), this.#hashSeed);
  }

  /**
   * Finds the slot of the key held in `encoder` (`bytes` long, hash `hash`), inserting it if it
   * is absent. Returns the slot index (and sets `foundCtrl`), or `TABLE_FULL`.
   */
  locate(bytes: number, hash: number): number {
    for (;;) {
      const found = this.#find(bytes, hash);
      if (found >= 0) {
        this.foundNew = false;
        return found;
      }
      const inserted = this.#insert(bytes, hash);
      if (inserted !== RETRY) {
        this.foundNew = true;
        return inserted;
      }
    }
  }

  /**
   * Finds the slot of the key held in `encoder` without inserting it: the slot (and sets
   * `foundCtrl`), or -1 when the key is not in the table. For caches that only read.
   */
  find(bytes: number, hash: number): number {
    return this.#find(bytes, hash);
  }

  /** The slot's first word index. */
  base(slot: number): number {
    return HEADER_WORDS + slot * this.slotWords;
  }

  /** The stripe a key of hash `hash` lives in (every slot of its probe chain is there). */
  stripeOf(hash: number): number {
    return stripeOfHash(hash, this.stripes);
  }

  #home(hash: number): number {
    // Stripe from the hash's top bits, home slot from its re-mixed top bits: two independent picks.
    const stripe = stripeOfHash(hash, this.stripes);
    const home = Math.imul(hash, 0x9e3779b1) >>> this.#homeShift; // top bits: 6, or log2 of longer stripes
    return stripe * this.slotsPerStripe + (home & this.#stripeMask);
  }

  /** The position in its stripe of the home slot of a key of hash `hash` (for compaction.ts). */
  homeInStripe(hash: number): number {
    return this.#home(hash) & this.#stripeMask;
  }

  /** The slot at probe position `i` from `first` (linear probing, wrapping inside the stripe). */
  #at(first: number, i: number): number {
    const stripeStart = first - (first & this.#stripeMask);
    return stripeStart + ((first + i) & this.#stripeMask);
  }

  #keyEquals(base: number, bytes: number, hash: number): boolean {
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
   * Writes the encoded key's words past the slot's own into the slot's heap record, first giving
   * the slot a larger record if its own is too short. Called with the slot claimed by this thread
   * (its record is written only under a claim, as its key words are). False when the heap has no
   * room for the record.
   */
  #writeTail(base: number, n: number): boolean {
    const heap = this.heap as KeyHeap;
    const tail = n - this.#inlineWords;
    const w = this.words;
    let ref = w[base + this.#refOffset] as number;
    let h = heap.view(ref + 1);
    if (ref === 0 || (h[ref] as number) < tail) {
      // At least twice the old one: a slot leaves at most about twice its longest key behind.
      ref = heap.allocate(ref === 0 ? tail : Math.max(tail, 2 * (h[ref] as number)));
      if (ref === 0) return false;
      // A plain write: the slot is ours, and its publish (a compareExchange) comes after it.
      w[base + this.#refOffset] = ref;
    }
    h = heap.view(ref + 1 + tail);
    const key = this.encoder.words;
    for (let i = 0; i < tail; i++) h[ref + 1 + i] = key[this.#inlineWords + i] as number;
    return true;
  }

  /**
   * Lock-free lookup. Returns the slot, or -1 when the key is not in the table; then
   * `#missFree`/`#missWord` hold the first free position of the chain and its ctrl word, for the
   * insert that follows (-1: none, or a claim came first, which the insert may take over).
   */
  #find(bytes: number, hash: number): number {
    const w = this.words;
    const first = this.#home(hash);
    let free = -1;
    let freeWord = 0;
    let claimFirst = false;
    for (let i = 0; i < this.slotsPerStripe; i++) {
      const slot = this.#at(first, i);
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
      if (!this.#keyEquals(base, bytes, hash)) continue;
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
    // The displacement before the compareExchange: once TOMB, the slot may be claimed and its hash rewritten.
    const displaced = this.#displacement(base);
    // compareExchange from the exact LIVE word: succeeds once, for this incarnation only.
    if (Atomics.compareExchange(this.words, base + S_CTRL, ctrl, ctrlWord(TOMB, ctrl >>> 2)) !== ctrl) return false;
    const slot = this.#slotAt(base);
    this.count(slot, C_LIVE, -1);
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
    const outcome = this.#state.retire(this.words, base);
    if (outcome === NOT_IDLE) return 0;
    if (this.finishReclaim(base, ctrl)) return ctrlWord(TOMB, ctrl >>> 2);
    // ALREADY_DEAD: a reclaim already past its linearisation point (its thread may have died)
    // that another thread finished first; RETIRED: this call's reclaim, finished by another.
    return outcome === RETIRED ? RECLAIMED_ELSEWHERE : 0;
  }

  /**
   * Age in ms of the claim in a BUSY word (a cancelled claim keeps its claim's stamp), at a
   * reading `nowMs` that may have been taken before the claim was: the difference modulo 2^29
   * read as signed, and a claim stamped after the reading is 0 ms old. (Read unsigned, such a
   * claim was 2^29 - 1 ms old: an insert whose reading came just before another inserter's claim
   * took that fresh claim over as abandoned, and the two wrote one slot.)
   */
  claimAge(ctrl: number, nowMs: number): number {
    const age = ((nowMs & CLAIM_STAMP_MASK) - ((ctrl >>> 2) & CLAIM_STAMP_MASK)) & CLAIM_STAMP_MASK;
    return age >= CLAIM_AGE_LIMIT ? 0 : age;
  }

  /**
   * Inserts the key held in `encoder`. Returns the slot, TABLE_FULL, or RETRY.
   *
   * No key ever gets a second live copy, whichever step of whichever inserter stalls (for less
   * than 30x claimTimeoutMs, the assumption at REUSE_AFTER_TIMEOUTS): a claim is published only by a
   * compareExchange from its own claim word, and a claim that another inserter of the same hash
   * finds expired is cancelled (its word changed) rather than passed over, so the stalled
   * inserter's publish fails and it finds the copy that won.
   */
  #insert(bytes: number, hash: number): number {
    const w = this.words;
    const first = this.#home(hash);
    const S = this.slotsPerStripe;
    let nowMs = Math.floor(performance.now());
    const reuseAfterMs = this.claimTimeoutMs * REUSE_AFTER_TIMEOUTS;
    // 1. The first free position in the probe chain (EMPTY, TOMB, or a long-abandoned claim,
    // cancelled or not): the one the lookup that missed just passed, unless a claim came first.
    let pos = this.#missFree;
    let from = this.#missWord;
    this.#missFree = -1;
    for (let i = 0; pos < 0 && i < S; i++) {
      // Atomics.load: any word will do, the claim below is a compareExchange from exactly it.
      const c = Atomics.load(w, this.base(this.#at(first, i)) + S_CTRL);
      const state = c & 3;
      if (state === EMPTY || state === TOMB || (state === BUSY && this.claimAge(c, nowMs) > reuseAfterMs)) {
        pos = i;
        from = c;
        break;
      }
    }
    if (pos < 0) return this.#reclaimStripe(first) ? RETRY : TABLE_FULL;
    const slot = this.#at(first, pos);
    const base = this.base(slot);
    const gen = (from & 3) === BUSY ? (from >>> 2) ^ 0x2aaaaaaa : (from >>> 2) + 1;
    const claim = ctrlWord(BUSY, nowMs & CLAIM_STAMP_MASK);
    // 2. Claim it. compareExchange from the exact word we saw: two inserters cannot both win.
    // Stalled before it: the word changed and we start over. Stalled after it, anywhere up to the
    // publish: inserters of the same hash wait for our claim up to claimTimeoutMs, then cancel
    // it; other inserters pass it by; only after 30x the timeout is the slot taken over.
    if (Atomics.compareExchange(w, base + S_CTRL, from, claim) !== from) return RETRY;
    if ((from & 3) === TOMB) this.count(slot, C_TOMBS, -1);
    // Atomics.store of the hash (seq-cst): a concurrent inserter of the same key that claims
    // another slot either sees this hash in its re-scan, or we see its claim in ours. The hash,
    // length and key are written while the slot is BUSY (ours, or cancelled and so still held):
    // nobody reads a BUSY slot's key, and only re-scans read its hash.
    Atomics.store(w, base + S_HASH, hash);
    w[base + S_KEY_BYTES] = bytes;
    const key = this.encoder.words;
    const n = keyWords(bytes);
    const inline = Math.min(n, this.#inlineWords);
    const at = base + this.keyOffset;
    for (let i = 0; i < inline; i++) w[at + i] = key[i] as number;
    // A long key's tail: a heap without room leaves the key out, as a full stripe does.
    if (n > inline && !this.#writeTail(base, n)) {
      this.#abandon(slot, claim, gen);
      return TABLE_FULL;
    }
    // 3. Re-scan the chain for the same key inserted (or being inserted) elsewhere.
    for (let i = 0; i < S; i++) {
      if (i === pos) continue;
      const otherBase = this.base(this.#at(first, i));
      // Atomics.load (seq-cst, acquire): after our hash store in the total order (see step 2),
      // and if we see LIVE we also see the key words written before it.
      const c = Atomics.load(w, otherBase + S_CTRL);
      const state = c & 3;
      if (i < pos && (state === EMPTY || state === TOMB)) {
        // A free slot before ours: it was taken, not free, when we scanned (we claim the first
        // free one), and it has been reclaimed since. A compaction may be turning it EMPTY, which
        // would cut our slot off from its chain (compaction.ts): give ours up and insert again.
        this.#abandon(slot, claim, gen);
        return RETRY;
      }
      if (state === EMPTY) break;
      // Atomics.load of ctrl again after the key compare: unchanged, the key we compared was this
      // incarnation's (as in #find).
      if (state === LIVE && this.#keyEquals(otherBase, bytes, hash) && Atomics.load(w, otherBase + S_CTRL) === c) {
        this.#abandon(slot, claim, gen);
        return RETRY; // the other copy wins; find() will return it
      }
      // A cancelled claim is no claim on any key: it can never be published, so nobody waits on it.
      if (state !== BUSY || ((c >>> 2) & CLAIM_CANCELLED) !== 0) continue;
      // Atomics.load of the hash (seq-cst), after its ctrl: if that inserter's hash store came
      // before our loads, we see it here; if not, it sees our claim (or our copy) in its re-scan.
      // A stale hash (the claim's inserter had not stored its own yet) only makes us wait for,
      // or cancel, a claim of another key: a delay, or a retry for that inserter.
      if (Atomics.load(w, otherBase + S_HASH) !== hash) continue;
      nowMs = Math.floor(performance.now());
      if (this.claimAge(c, nowMs) > this.claimTimeoutMs) {
        // Its inserter is dead or only stalled, and a stalled one may still publish. Cancel its
        // claim: compareExchange from the exact word we judged expired, to the same claim marked
        // cancelled. Its publish and abandon, compareExchanges from its claim word, now fail; it
        // keeps its claim's stamp and stays BUSY, so the slot is reused only after 30x the
        // timeout, after any write the stalled inserter may still make into it (its key, its
        // initial state). Stalled before the compareExchange, it fails if the word changed
        // (published, abandoned, cancelled by another, or taken over), and we look at the slot
        // again. It can succeed only on the claim we judged, older still by then, or on one with
        // the very same stamp, made in the same ms and so just as expired: cancelling that one
        // costs its inserter a retry. Stalled after it, nothing is left half done: the cancel is
        // the one write, and every other inserter passes the cancelled slot by.
        if (Atomics.compareExchange(w, otherBase + S_CTRL, c, ctrlWord(BUSY, (c >>> 2) | CLAIM_CANCELLED)) !== c) i--;
        continue;
      }
      if (i < pos) {
        // An earlier claim for what may be the same key wins; wait for it and start over.
        this.#abandon(slot, claim, gen);
        this.#awaitClaim(otherBase, c);
        return RETRY;
      }
      // A later claim yields to ours; wait until it has (or it expires), then look at that slot again.
      this.#awaitClaim(otherBase, c);
      i--;
    }
    // 4. Fresh state, then publish. The state hook reads the clock only now, after the claim.
    // Its writes go to our own slot, which stays BUSY until our publish, or, if our claim was
    // cancelled, until 30x the timeout: they never reach another key's state (see
    // REUSE_AFTER_TIMEOUTS for a stall longer than that).
    this.#state.initSlot(w, base, gen & PAYLOAD_MASK);
    // compareExchange from our claim (release: our key and state are visible to whoever loads
    // LIVE). It fails if our claim was cancelled (we stalled past claimTimeoutMs and an inserter
    // of the same hash went on: it may have published this key) or taken over (past 30x): then
    // we start over and find the copy that won, or insert again. Stalled before it for ever, we
    // leave a BUSY slot that is cancelled or reused in time.
    if (Atomics.compareExchange(w, base + S_CTRL, claim, ctrlWord(LIVE, gen)) !== claim) return RETRY;
    this.count(slot, C_LIVE, 1);
    if (pos !== 0) this.count(slot, C_DISPLACED, pos);
    this.foundCtrl = ctrlWord(LIVE, gen);
    return slot;
  }

  /**
   * Gives up our claim: the slot becomes a tombstone of generation `gen` (the one our publish
   * would have used), never EMPTY (inserters that passed it while it was ours may hold slots
   * further on), and never the word it was before our claim (a compaction that read that word
   * must not mistake the slot for one that stayed free all along: see compaction.ts).
   */
  #abandon(slot: number, claim: number, gen: number): void {
    // compareExchange from our claim: if it was cancelled meanwhile, the slot stays held until
    // 30x the timeout (we may have written it); if taken over, we leave the new owner alone.
    if (Atomics.compareExchange(this.words, this.base(slot) + S_CTRL, claim, ctrlWord(TOMB, gen)) === claim) this.count(slot, C_TOMBS, 1);
  }

  /**
   * Spins until a claim is published, abandoned, cancelled, taken over, or expired; the caller
   * then looks at the slot again. Claims last a few hundred ns.
   */
  #awaitClaim(base: number, claim: number): void {
    for (let spins = 0; ; spins++) {
      // Atomics.load: any change of the exact claim word ends the wait; the caller re-reads it.
      if (Atomics.load(this.words, base + S_CTRL) !== claim) return;
      if ((spins & 1023) === 1023 && this.claimAge(claim, Math.floor(performance.now())) > this.claimTimeoutMs) return;
    }
  }

  /**
   * Whether the claim in BUSY word `c` (at `base`) can never be published: it was cancelled, or
   * it is older than claimTimeoutMs and this call cancelled it (a compareExchange from the exact
   * word judged, as an insert does in its re-scan: its inserter's publish now fails, and it
   * inserts again).
   */
  cancelExpired(base: number, c: number): boolean {
    if (((c >>> 2) & CLAIM_CANCELLED) !== 0) return true;
    // The clock after the load of the claim word (as in #awaitClaim): never older than its stamp.
    if (this.claimAge(c, Math.floor(performance.now())) <= this.claimTimeoutMs) return false;
    const cancelled = ctrlWord(BUSY, (c >>> 2) | CLAIM_CANCELLED);
    // compareExchange from the word judged expired: fails if it was published, abandoned, or
    // cancelled meanwhile (then the caller gives up, and the next sweep looks again).
    return Atomics.compareExchange(this.words, base + S_CTRL, c, cancelled) === c;
  }

  /** Reclaims every idle key in the stripe of `first`, then compacts it; true if any slot was freed. */
  #reclaimStripe(first: number): boolean {
    return this.#sweeper.sweepStripe((first / this.slotsPerStripe) | 0, -1, 0) !== 0;
  }

  /**
   * Reclaims every idle key in the table and every long-abandoned claim, and compacts every
   * stripe. Returns the count of slots freed (reclaimed keys and claims). See compaction.ts.
   */
  sweep(): number {
    return this.#sweeper.sweep();
  }

  /** Turns the tombstones of `stripe` that no key's probe chain crosses back into EMPTY slots; returns how many (compaction.ts). */
  compactStripe(stripe: number): number {
    return this.#sweeper.compactStripe(stripe);
  }

  /**
   * What every limiter's `stats()` reports about its table (it adds its own `casRetries`).
   * O(capacity); a snapshot that may race with writers.
   */
  report(casRetries: number): {
    liveKeys: number; maxKeys: number; capacity: number; tombstones: number; claimed: number; tableBytes: number; keyHeapBytes: number;
    casRetries: number;
  } {
    const c = this.scan();
    return {
      liveKeys: c.live, maxKeys: this.words[H_MAX_KEYS] as number, capacity: this.capacity, tombstones: c.tombstones,
      claimed: c.claimed, tableBytes: this.words.byteLength, keyHeapBytes: this.heap?.byteLength ?? 0, casRetries,
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
    const w = this.words;
    let n = 0;
    let sum = 0;
    let max = 0;
    for (let slot = 0; slot < this.capacity; slot++) {
      const base = this.base(slot);
      // Atomics.load of ctrl, then the hash (written before the publishing compareExchange).
      if ((Atomics.load(w, base + S_CTRL) & 3) !== LIVE) continue;
      const home = this.#home(w[base + S_HASH] as number);
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
    const counts: TableCounts = { live: 0, tombstones: 0, claimed: 0 };
    for (let slot = 0; slot < this.capacity; slot++) {
      const base = this.base(slot);
      const state = Atomics.load(this.words, base + S_CTRL) & 3;
      if (state === LIVE) {
        if (!this.#state.isDead(this.words, base)) counts.live++;
        else counts.tombstones++;
      } else if (state === TOMB) counts.tombstones++;
      else if (state === BUSY) counts.claimed++;
    }
    return counts;
  }
}

const RETRY = -2;
