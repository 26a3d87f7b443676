// A worker parked right after its lock check (fixtures/park-after-check-worker.mjs: its
// Atomics.load wrapped), the one window of a locked decision that no clock reading reaches.
import { FROZEN_MS, startParked, type Parked } from './park.js';

const url = new URL('../fixtures/park-after-check-worker.mjs', import.meta.url);

/** Starts it on `request` and resolves once it parked after the load of `lockIndex` that returned its token. */
export function parkAfterCheck(
  kind: 'lease' | 'rate' | 'policy', handle: { table: SharedArrayBuffer }, request: unknown, cost: number, lockIndex: number, frozenMs = FROZEN_MS,
): Promise<Parked> {
  return startParked(url, { kind, handle, request, cost, lockIndex, frozenMs });
}
