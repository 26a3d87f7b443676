// An admission from this thread's own writes whose record of the key is older than a reclaim of
// it, variant 'reclaim': see _own.mjs.
import { ownWriteScenario } from './_own.mjs';

export default ownWriteScenario('own-write-reclaim', 'reclaim');
