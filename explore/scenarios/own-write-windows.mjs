// An admission from this thread's own writes racing one from loads, variant 'windows': see _own.mjs.
import { ownWriteScenario } from './_own.mjs';

export default ownWriteScenario('own-write-windows', 'windows');
