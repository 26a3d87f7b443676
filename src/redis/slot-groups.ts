import { describe } from '../config/check.js';
import { SLOTS } from './key-slot.js';

/**
 * Splits `items` by Redis Cluster slot, for one script call per slot (a script's keys must all be
 * in one slot). Each group keeps the items' arrival order, and the groups come in the order of
 * their first item, so a batch whose items share a slot comes back as one group in the same
 * order. `slotOf` is called once per item; it must return an integer from 0 to 16383 (e.g.
 * `keySlot` of the item's first Redis key), or this throws a `RangeError` naming the value.
 * Returns new arrays; `items` is left as it was.
 */
export function groupBySlot<T>(items: readonly T[], slotOf: (item: T) => number): T[][] {
  const groups: T[][] = [];
  const bySlot = new Map<number, T[]>();
  for (const item of items) {
    const slot = slotOf(item);
    if (!Number.isInteger(slot) || slot < 0 || slot >= SLOTS) {
      throw new RangeError(`slotOf(item) must return an integer slot from 0 to ${SLOTS - 1}, got ${describe(slot)}`);
    }
    let group = bySlot.get(slot);
    if (group === undefined) {
      group = [];
      bySlot.set(slot, group);
      groups.push(group);
    }
    group.push(item);
  }
  return groups;
}
