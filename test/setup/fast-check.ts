// Property tests draw from one fixed seed, so a run repeats the last one exactly: several check,
// after the property, that their random sequences reached the cases that matter (refusals,
// penalties), and a random seed let that count fall short now and then. FC_SEED=<int> draws
// another sequence (FC_SEED=random a new one each run) when looking for new failures; a failure
// prints the seed and path that replay it.
import fc from 'fast-check';

const chosen = process.env.FC_SEED;
if (chosen !== 'random') {
  const seed = chosen === undefined || chosen === '' ? 0x51_1ce : Number(chosen);
  if (!Number.isSafeInteger(seed)) throw new RangeError(`FC_SEED must be an integer or "random", got ${JSON.stringify(chosen)}`);
  fc.configureGlobal({ seed });
}
