// An admission from this thread's own write racing one from loads, variant 'cap': see _own.mjs.
import { ownWriteScenario } from './_own.mjs';

export default ownWriteScenario('own-write-cap', 'cap');
