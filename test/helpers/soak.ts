// The long variants of the storms, replays and soaks run under `npm run test:soak`
// (SLUICE_SOAK=1); `npm test` runs a fast case of each, so that it stays a few minutes long. CI
// runs both.

/** True under `npm run test:soak`. */
export const SOAK = process.env.SLUICE_SOAK === '1';

/** `fast` under `npm test`, `soak` under `npm run test:soak`. */
export function soakOr<T>(fast: T, soak: T): T {
  return SOAK ? soak : fast;
}

/**
 * The cases to run: every case under `npm run test:soak`; under `npm test` those named in
 * `fast` (each must exist: a renamed case fails here rather than silently leaving the fast run).
 */
export function fastCases<C extends { name: string }>(cases: C[], fast: string[]): C[] {
  if (SOAK) return cases;
  const chosen = cases.filter((c) => fast.includes(c.name));
  if (chosen.length !== fast.length) throw new Error(`fastCases: no case named ${fast.filter((n) => !cases.some((c) => c.name === n)).join(', ')}`);
  return chosen;
}
