import { C_DISPLACED, C_LIVE, C_TOMBS, CELL_WORDS, COUNTER_CELLS, H_COUNTERS } from './layout.js';

/**
 * The table's gauges kept as it goes (layout.ts, "counters"): SlotTable counts each ctrl
 * transition here right after the compareExchange that made it, in the cell of the slot's stripe;
 * `sums` adds the cells up for a scrape, O(COUNTER_CELLS) instead of a read of every slot.
 *
 * Thread-safety: any thread; each count is one Atomics.add, and a sum reads each word once.
 */
export class TableCounters {
  readonly #words: Int32Array;
  /** Word index of the first cell. */
  readonly #first: number;
  readonly #slotsPerStripe: number;

  constructor(words: Int32Array, slotsPerStripe: number) {
    this.#words = words;
    this.#first = words[H_COUNTERS] as number;
    this.#slotsPerStripe = slotsPerStripe;
  }

  /**
   * Adds `delta` to counter `word` (C_LIVE, C_TOMBS, C_DISPLACED) of the cell of `slot`'s stripe.
   * Atomics.add: cells are shared by the stripes that map to them; a sum needs no order with the
   * slots' words. A thread that stops for ever between a transition and its count leaves that
   * transition uncounted (see SlotTable.gauges).
   */
  count(slot: number, word: number, delta: number): void {
    const cell = ((slot / this.#slotsPerStripe) | 0) & (COUNTER_CELLS - 1);
    Atomics.add(this.#words, this.#first + cell * CELL_WORDS + word, delta);
  }

  /** The counters summed over the cells: LIVE slots, TOMB slots, and the LIVE slots' displacement. */
  sums(): { live: number; tombstones: number; displaced: number } {
    const w = this.#words;
    let live = 0;
    let tombstones = 0;
    let displaced = 0;
    for (let cell = this.#first; cell < this.#first + COUNTER_CELLS * CELL_WORDS; cell += CELL_WORDS) {
      // Atomics.load: each word on its own; the three sums are a snapshot of no single instant.
      live += Atomics.load(w, cell + C_LIVE);
      tombstones += Atomics.load(w, cell + C_TOMBS);
      displaced += Atomics.load(w, cell + C_DISPLACED);
    }
    return { live, tombstones, displaced };
  }
}
