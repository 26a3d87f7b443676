// An admission from loads whose limits lose their races across a reclaim of its key, variant
// 'loads': see _own.mjs.
import { ownWriteScenario } from './_own.mjs';

export default ownWriteScenario('reclaim-lost-race', 'loads');
