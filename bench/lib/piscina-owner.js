// The piscina task for the "owner thread" comparison in bench/peers.js: every check is a message
// to the one pool thread, which keeps the only copy of the state in a plain Map GCRA. This is how
// a limit is shared between workers without shared memory.
import { perSecond } from 'sluice';
import { createMapGcra } from './map-gcra.js';

// The "mostly allowed" limit of bench/peers.js (keep the two in step).
const gcra = createMapGcra(perSecond(5e7, { burst: 5e7 }));

/** @param {{ key: string }} task */
export default function check({ key }) {
  return gcra.allow(key);
}
