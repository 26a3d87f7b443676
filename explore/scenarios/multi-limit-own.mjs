// An admission from this thread's own writes on two GCRA limits, the first limit binding: see _own.mjs.
import { ownWriteScenario } from './_own.mjs';

export default ownWriteScenario('multi-limit-own', true);
