import { keyWords, type KeyEncoder } from './hash.js';
import {
  BUSY, C_DISPLACED, C_LIVE, C_TOMBS, CLAIM_CANCELLED, CLAIM_STAMP_MASK, ctrlWord, EMPTY, LIVE, PAYLOAD_MASK, S_CTRL, S_HASH, S_KEY_BYTES, TOMB,
} from './layout.js';
import type { KeyHeap } from './key-heap.js';
import type { SlotState } from './table.js';
import { processNow } from '../time/clock.js';

/**
 * Inserting a key into a SlotTable: claim the first free slot of its probe chain, write the key,
 * re-scan the chain for a copy of the key inserted (or being inserted) meanwhile, write the fresh
 * state, publish (docs/design.md, "Insert"). One instance per SlotTable instance, so per thread.
 *
 * Thread-safety: `insert` and `cancelExpired` may run at the same time as any table method on
 * any thread; neither takes a lock, and an inserter that stops anywhere leaves a claim that other
 * threads cancel or take over in time.
 */

/** Returned by `insert` when the key's stripe has no free or reclaimable slot (and by SlotTable's `locate`). */
export const TABLE_FULL = -1;
/** Returned by `insert` when the caller must look the key up again (a race lost, or a copy found elsewhere). */
export const RETRY = -2;

/**
 * An expired claim, cancelled or not, may be taken over once it is `reuseAfterMs` old (counted
 * from its claim stamp; the table's H_REUSE_AFTER_MS): this many claim timeouts, and never less
 * than REUSE_FLOOR_MS.
 *
 * The table's one timing assumption: no thread stalls for that long between its claim and its
 * publish (nor, slot-lock.ts, between a lock's check and its writes) while other threads of the
 * process run on. One that did would still write its hash, key and initial state into the slot
 * (it learns that it lost the slot only when its publish fails), over those of the slot's next
 * occupant: that key's state would be reset (found: at claimTimeoutMs 1 a stall of 30 ms, which a
 * loaded 2-core host reaches, gave a key a second burst), or the slot would read as a second copy
 * of the stalled inserter's key. A dead thread writes nothing: its claim costs the slot until then.
 * Stamps are ms modulo 2^29, so a claim word repeats only after 2^29 ms (about 6.2 days): a
 * publish stalled that long could land on a later claim of its slot that carries the same stamp.
 * `reuseAfterMs` is at most 30 minutes (30x MAX_CLAIM_TIMEOUT_MS), far below both that and the
 * ages the signed 29-bit difference tells apart (CLAIM_AGE_LIMIT); a dead claim left unswept looks
 * young again for half of every 6.2 days, which delays its reuse and nothing else.
 */
export const REUSE_AFTER_TIMEOUTS = 30;

/**
 * The least `reuseAfterMs`, whatever claimTimeoutMs: 30 s, which the default claimTimeoutMs
 * (1,000 ms) reaches anyway. A small claimTimeoutMs hands a dead holder's lock to the next decision
 * sooner; it does not shorten the stall a thread may survive.
 */
export const REUSE_FLOOR_MS = 30_000;

/** The `reuseAfterMs` of a table whose claimTimeoutMs is `claimTimeoutMs` (unless a test set its own). */
export function reuseAfterMsFor(claimTimeoutMs: number): number {
  return Math.max(claimTimeoutMs * REUSE_AFTER_TIMEOUTS, REUSE_FLOOR_MS);
}

/**
 * Claim ages from 2^28 ms (about 3.1 days) up read as negative: a claim stamped after the reading
 * that judges it. 30x the longest claimTimeoutMs (60,000) is 30 minutes, well inside.
 */
const CLAIM_AGE_LIMIT = 2 ** 28;

/**
 * Age in ms of the claim in a BUSY word (a cancelled claim keeps its claim's stamp), at a
 * reading `nowMs` that may have been taken before the claim was: the difference modulo 2^29
 * read as signed, and a claim stamped after the reading is 0 ms old. (Read unsigned, such a
 * claim was 2^29 - 1 ms old: an insert whose reading came just before another inserter's claim
 * took that fresh claim over as abandoned, and the two wrote one slot.)
 */
export function claimAge(ctrl: number, nowMs: number): number {
  const age = ((nowMs & CLAIM_STAMP_MASK) - ((ctrl >>> 2) & CLAIM_STAMP_MASK)) & CLAIM_STAMP_MASK;
  return age >= CLAIM_AGE_LIMIT ? 0 : age;
}

/**
 * Whether the claim word `claim`, just placed by this thread, is older than the table's
 * claimTimeoutMs at a reading taken now. Its stamp is a reading taken before its
 * compareExchange: a thread that stops between the two (a stop anywhere must be safe) places a
 * claim another thread may judge expired (reuseAfterMs) and take over while the first goes on to
 * write the slot (found: an attack stalled an insert there, and a key got a second burst). A
 * claimer that finds its claim young here has it before any other thread may take it over: a
 * taker's reading would have to come after this one and be reuseAfterMs past the stamp, which
 * only a stall after this check, between the claim and its publish, allows (REUSE_AFTER_TIMEOUTS).
 * One that finds it old gives it up before writing anything.
 */
export function bornOld(t: Pick<InsertHost, 'claimTimeoutMs'>, claim: number): boolean {
  // The clock after the compareExchange (it read the claim's own stamp before).
  return claimAge(claim, Math.floor(processNow())) > t.claimTimeoutMs;
}

/** What an insert needs of its table (SlotTable). */
export interface InsertHost {
  readonly words: Int32Array;
  readonly slotsPerStripe: number;
  readonly claimTimeoutMs: number;
  /** How old an expired claim must be before its slot is taken over (REUSE_AFTER_TIMEOUTS). */
  readonly reuseAfterMs: number;
  /** Offset of a slot's key words from its base. */
  readonly keyOffset: number;
  /** Holds the key being inserted (encoded by the caller). */
  readonly encoder: KeyEncoder;
  /** Long keys' tails (null when every key fits its slot). */
  readonly heap: KeyHeap | null;
  /** The slot's first word index. */
  base(slot: number): number;
  /** The home slot of a key of hash `hash`: the first of its probe chain. */
  homeSlot(hash: number): number;
  /** The slot at probe position `i` of the chain that starts at `first`. */
  probeSlot(first: number, i: number): number;
  /** Whether the LIVE slot at `base` holds the encoded key (`bytes` long, hash `hash`); the caller re-reads ctrl after. */
  keyEquals(base: number, bytes: number, hash: number): boolean;
  /** Counts a transition of `slot` in the table's gauges. */
  count(slot: number, word: number, delta: number): void;
  /** Reclaims every idle key of the stripe of slot `first` and compacts it; true if any slot was freed. */
  reclaimStripeOf(first: number): boolean;
  /** Raises this instance's readings to the reclaim floor if it moved (SlotTable.noteFloor). */
  noteFloor(): void;
}

/** A table's inserts on this thread. */
export class SlotInserter {
  readonly #t: InsertHost;
  readonly #state: SlotState;
  /** Key words a slot holds; a longer key keeps the rest in the heap record of its slot. */
  readonly #inlineWords: number;
  /** Offset of a slot's reference word to its heap record (with a heap). */
  readonly #refOffset: number;
  /** The LIVE ctrl word that the last insert to return a slot published. */
  ctrl = 0;

  constructor(t: InsertHost, state: SlotState, inlineWords: number, refOffset: number) {
    this.#t = t;
    this.#state = state;
    this.#inlineWords = inlineWords;
    this.#refOffset = refOffset;
  }

  /**
   * Inserts the key held in the table's `encoder` (`bytes` long, hash `hash`). `missFree` is the
   * first free position of its chain that the lookup which missed it passed, with its ctrl word
   * `missWord` (-1: none, or a claim came first). Returns the slot (and sets `ctrl`), TABLE_FULL,
   * or RETRY.
   *
   * No key ever gets a second live copy, whichever step of whichever inserter stalls (for less
   * than the table's reuseAfterMs, the assumption at REUSE_AFTER_TIMEOUTS): a claim is published only by a
   * compareExchange from its own claim word, and a claim that another inserter of the same hash
   * finds expired is cancelled (its word changed) rather than passed over, so the stalled
   * inserter's publish fails and it finds the copy that won.
   */
  insert(bytes: number, hash: number, missFree: number, missWord: number): number {
    const t = this.#t;
    const w = t.words;
    const first = t.homeSlot(hash);
    const S = t.slotsPerStripe;
    const nowMs = Math.floor(processNow());
    const reuseAfterMs = t.reuseAfterMs;
    // 1. The first free position in the probe chain (EMPTY, TOMB, or a long-abandoned claim,
    // cancelled or not): missFree, unless the lookup found a claim first.
    let pos = missFree;
    let from = missWord;
    for (let i = 0; pos < 0 && i < S; i++) {
      // Atomics.load: any word will do, the claim below is a compareExchange from exactly it.
      const c = Atomics.load(w, t.base(t.probeSlot(first, i)) + S_CTRL);
      const state = c & 3;
      if (state === EMPTY || state === TOMB || (state === BUSY && claimAge(c, nowMs) > reuseAfterMs)) {
        pos = i;
        from = c;
        break;
      }
    }
    if (pos < 0) return t.reclaimStripeOf(first) ? RETRY : TABLE_FULL;
    const slot = t.probeSlot(first, pos);
    const base = t.base(slot);
    const gen = (from & 3) === BUSY ? (from >>> 2) ^ 0x2aaaaaaa : (from >>> 2) + 1;
    const claim = ctrlWord(BUSY, nowMs & CLAIM_STAMP_MASK);
    // 2. Claim it. compareExchange from the exact word we saw: two inserters cannot both win.
    // Stalled before it: the word changed and we start over. Stalled after it, anywhere up to the
    // publish: inserters of the same hash wait for our claim up to claimTimeoutMs, then cancel
    // it; other inserters pass it by; only once it is reuseAfterMs old is the slot taken over.
    if (Atomics.compareExchange(w, base + S_CTRL, from, claim) !== from) return RETRY;
    if ((from & 3) === TOMB) t.count(slot, C_TOMBS, -1);
    // A claim carries the reading taken before it: one that landed already old (this thread
    // stopped between that reading and the compareExchange) could be taken over as soon as it
    // landed. Given up before anything is written (bornOld).
    if (bornOld(t, claim)) {
      this.#abandon(slot, claim, gen);
      return RETRY;
    }
    // Atomics.store of the hash (seq-cst): a concurrent inserter of the same key that claims
    // another slot either sees this hash in its re-scan, or we see its claim in ours. The hash,
    // length and key are written while the slot is BUSY (ours, or cancelled and so still held):
    // nobody reads a BUSY slot's key, and only re-scans read its hash.
    Atomics.store(w, base + S_HASH, hash);
    // A long key's tail: a heap without room leaves the key out, as a full stripe does.
    if (!writeKey(t, base, bytes, this.#inlineWords, this.#refOffset)) {
      this.#abandon(slot, claim, gen);
      return TABLE_FULL;
    }
    // 3. Re-scan the chain for the same key inserted (or being inserted) elsewhere.
    for (let i = 0; i < S; i++) {
      if (i === pos) continue;
      const otherBase = t.base(t.probeSlot(first, i));
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
      const other = judgeOther(t, otherBase, c, bytes, hash);
      if (other === OTHER_COPY) {
        this.#abandon(slot, claim, gen);
        return RETRY; // the other copy wins; find() will return it
      }
      if (other === OTHER_PASS) continue;
      if (other === OTHER_CHANGED) {
        i--; // look at the slot again
        continue;
      }
      if (i < pos) {
        // An earlier claim for what may be the same key wins; wait for it and start over.
        this.#abandon(slot, claim, gen);
        awaitClaim(t, otherBase, c);
        return RETRY;
      }
      // A later claim yields to ours; wait until it has (or it expires), then look at that slot again.
      awaitClaim(t, otherBase, c);
      i--;
    }
    // 4. Fresh state, then publish. The state hook reads the clock only now, after the claim.
    // Its writes go to our own slot, which stays BUSY until our publish, or, if our claim was
    // cancelled, until reuseAfterMs: they never reach another key's state (see
    // REUSE_AFTER_TIMEOUTS for a stall longer than that).
    t.noteFloor(); // after the scans that found the key missing: a reclaim's floor reaches initSlot
    this.#state.initSlot(w, base, gen & PAYLOAD_MASK);
    // compareExchange from our claim (release: our key and state are visible to whoever loads
    // LIVE). It fails if our claim was cancelled (we stalled past claimTimeoutMs and an inserter
    // of the same hash went on: it may have published this key) or taken over (past
    // reuseAfterMs): then we start over and find the copy that won, or insert again. Stalled before it for ever, we
    // leave a BUSY slot that is cancelled or reused in time.
    if (Atomics.compareExchange(w, base + S_CTRL, claim, ctrlWord(LIVE, gen)) !== claim) return RETRY;
    t.count(slot, C_LIVE, 1);
    if (pos !== 0) t.count(slot, C_DISPLACED, pos);
    this.ctrl = ctrlWord(LIVE, gen);
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
    // reuseAfterMs (we may have written it); if taken over, we leave the new owner alone.
    const t = this.#t;
    if (Atomics.compareExchange(t.words, t.base(slot) + S_CTRL, claim, ctrlWord(TOMB, gen)) === claim) t.count(slot, C_TOMBS, 1);
  }

  /**
   * Whether the claim in BUSY word `c` (at `base`) can never be published: it was cancelled, or
   * it is older than claimTimeoutMs and this call cancelled it (a compareExchange from the exact
   * word judged, as an insert does in its re-scan: its inserter's publish now fails, and it
   * inserts again).
   */
  cancelExpired(base: number, c: number): boolean {
    // A changed word: the caller gives up, and the next sweep looks again.
    return cancelIfExpired(this.#t, base, c) === CANCELLED;
  }
}

/** judgeOther's answers. */
export const OTHER_PASS = 0;
export const OTHER_COPY = 1;
export const OTHER_CLAIM = 2;
export const OTHER_CHANGED = 3;

/**
 * What an insert's re-scan makes of another slot of its key's chain (either layout's), at `base`,
 * whose ctrl word it loaded as `c` after its own claim (or entry) was placed: OTHER_COPY, a live
 * copy of the key being inserted (this insert gives way); OTHER_CLAIM, a claim younger than
 * claimTimeoutMs for the same hash, which may be the same key (the caller waits for it or yields
 * to it, by position); OTHER_CHANGED, the slot's word changed under an expired claim's cancel
 * (look again); OTHER_PASS, anything else (another key, a free slot, a cancelled claim, or an
 * expired one this call cancelled).
 */
export function judgeOther(t: InsertHost, base: number, c: number, bytes: number, hash: number): number {
  const w = t.words;
  const state = c & 3;
  // Atomics.load of ctrl again after the key compare: unchanged, the key compared was this
  // incarnation's (as in SlotTable's #find).
  if (state === LIVE) return t.keyEquals(base, bytes, hash) && Atomics.load(w, base + S_CTRL) === c ? OTHER_COPY : OTHER_PASS;
  // A cancelled claim is no claim on any key: it can never be published, so nobody waits on it.
  if (state !== BUSY || ((c >>> 2) & CLAIM_CANCELLED) !== 0) return OTHER_PASS;
  // Atomics.load of the hash (seq-cst), after its ctrl: if that inserter's hash store came before
  // our loads, we see it here; if not, it sees our claim (or our copy) in its re-scan. A stale hash
  // (the claim's inserter had not stored its own yet, or, in a SLAB table, the slot was claimed for
  // another key whose claimer has not cleared the entry yet) only makes us wait for, or cancel, a
  // claim of another key: a delay, or a retry for that inserter.
  if (Atomics.load(w, base + S_HASH) !== hash) return OTHER_PASS;
  // Older than claimTimeoutMs: cancelled, and passed by; the word changed first: look again.
  const judged = cancelIfExpired(t, base, c);
  return judged === CANCELLED ? OTHER_PASS : judged === CHANGED ? OTHER_CHANGED : OTHER_CLAIM;
}

/** cancelIfExpired's answers. */
export const YOUNG = 0;
export const CANCELLED = 1;
export const CHANGED = -1;

/**
 * What to make of the BUSY word `c` loaded from the slot at `base`: CANCELLED when the claim was
 * cancelled, or is older than claimTimeoutMs and this call cancelled it; YOUNG when it is not that
 * old; CHANGED when the slot's word changed before the cancel. Written once for the re-scans of
 * both layouts (insert.ts, slab-directory.ts) and for compaction (SlotInserter.cancelExpired).
 *
 * Its claimer is dead or only stalled, and a stalled one may still publish. The cancel is a
 * compareExchange from the exact word judged expired to the same claim marked cancelled: the
 * claimer's publish and abandon, compareExchanges from its claim word, then fail; it keeps its
 * claim's stamp and stays BUSY, so the slot is reused only once it is reuseAfterMs old, after any
 * write the stalled claimer may still make into it (its key, its initial state). Stalled before
 * the compareExchange, the canceller fails if the word changed (published, abandoned, cancelled
 * by another, or taken over). It can succeed only on the claim judged, older still by then, or on
 * one with the very same stamp, made in the same ms and so just as expired: cancelling that one
 * costs its claimer a retry. Stalled after it, nothing is left half done: the cancel is the one
 * write, and every other inserter passes the cancelled slot by.
 */
export function cancelIfExpired(t: Pick<InsertHost, 'words' | 'claimTimeoutMs'>, base: number, c: number): number {
  if (((c >>> 2) & CLAIM_CANCELLED) !== 0) return CANCELLED;
  // The clock after the load of the claim word (as in awaitClaim): never older than its stamp.
  if (claimAge(c, Math.floor(processNow())) <= t.claimTimeoutMs) return YOUNG;
  const cancelled = ctrlWord(BUSY, (c >>> 2) | CLAIM_CANCELLED);
  // compareExchange from the word judged expired.
  return Atomics.compareExchange(t.words, base + S_CTRL, c, cancelled) === c ? CANCELLED : CHANGED;
}

/**
 * Spins until the claim `claim` at `base` is published, abandoned, cancelled, taken over, or
 * expired; the caller then looks at the slot again. Claims last a few hundred ns.
 */
export function awaitClaim(t: Pick<InsertHost, 'words' | 'claimTimeoutMs'>, base: number, claim: number): void {
  for (let spins = 0; ; spins++) {
    // Atomics.load: any change of the exact claim word ends the wait; the caller re-reads it.
    if (Atomics.load(t.words, base + S_CTRL) !== claim) return;
    if ((spins & 1023) === 1023 && claimAge(claim, Math.floor(processNow())) > t.claimTimeoutMs) return;
  }
}

/**
 * Writes the encoded key (`bytes` long) into the slot at `base`: its length, its first words, and
 * a long key's tail in the slot's heap record, first giving the slot a larger record if its own
 * is too short. Called with the slot claimed by this thread (a slot's key and record are written
 * only under a claim, and nobody reads a BUSY slot's key). False when the heap has no room.
 */
export function writeKey(t: InsertHost, base: number, bytes: number, inlineWords: number, refOffset: number): boolean {
  const w = t.words;
  w[base + S_KEY_BYTES] = bytes;
  const key = t.encoder.words;
  const n = keyWords(bytes);
  const inline = Math.min(n, inlineWords);
  const at = base + t.keyOffset;
  for (let i = 0; i < inline; i++) w[at + i] = key[i] as number;
  if (n === inline) return true;
  const heap = t.heap as KeyHeap;
  const tail = n - inlineWords;
  let ref = w[base + refOffset] as number;
  let h = heap.view(ref + 1);
  if (ref === 0 || (h[ref] as number) < tail) {
    // At least twice the old one: a slot leaves at most about twice its longest key behind.
    ref = heap.allocate(ref === 0 ? tail : Math.max(tail, 2 * (h[ref] as number)));
    if (ref === 0) return false;
    // A plain write: the slot is ours, and its publish (a compareExchange) comes after it.
    w[base + refOffset] = ref;
  }
  h = heap.view(ref + 1 + tail);
  for (let i = 0; i < tail; i++) h[ref + 1 + i] = key[inlineWords + i] as number;
  return true;
}
