// An admission from this thread's own writes on two GCRA limits, the second limit binding: see _own.mjs.
import { ownWriteScenario } from './_own.mjs';

export default ownWriteScenario('multi-limit-own-second', false);
