/**
 * Strict option names. An options object, a limit or a rule with a name nobody reads (`onfull`,
 * `brust`, `usr`) would otherwise be ignored, or worse, read as its default: a rule with `usr`
 * becomes a second default rule. Such a name is refused with a `TypeError` that names it, the
 * closest known name and every known one, before anything is built or changed.
 */

/**
 * Throws `TypeError` when `value` has an own enumerable key that `known` lacks: `where.name is
 * not a <what>; did you mean where.<closest>? (known: ...)`. `what` says what the names are, e.g.
 * 'RateLimiter option' or 'limit field'.
 */
export function checkNames(value: object, known: readonly string[], where: string, what: string): void {
  for (const name of Object.keys(value)) {
    if (known.includes(name)) continue;
    const near = closest(name, known);
    const hint = near === undefined ? '' : `; did you mean ${where}.${near}?`;
    throw new TypeError(`${where}.${name} is not a ${what}${hint} (known: ${known.join(', ')})`);
  }
}

/**
 * The known name `name` most likely meant: the same but for case, or the nearest within a few
 * edits (a third of its length, at least 1, at most 3; a swap of two neighbours is one edit).
 */
export function closest(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const sameCase = known.find((k) => k.toLowerCase() === lower);
  if (sameCase !== undefined) return sameCase;
  const most = Math.min(3, Math.max(1, Math.floor(name.length / 3)));
  let best: string | undefined;
  let bestDistance = most + 1;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

/** Edits (insert, delete, replace, swap of neighbours) from `a` to `b`: optimal string alignment. */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array<number>(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((d[(i - 1) * cols + j] as number) + 1, (d[i * cols + j - 1] as number) + 1, (d[(i - 1) * cols + j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, (d[(i - 2) * cols + j - 2] as number) + 1);
      d[i * cols + j] = v;
    }
  }
  return d[rows * cols - 1] as number;
}

/**
 * `names` as the list of T's keys, checked by the compiler to hold every one of them: a field
 * added to an options type and not here is a compile error (naming it), not a silent refusal.
 */
export function namesOf<T>() {
  return <const N extends readonly (keyof T & string)[]>(
    names: N & ([Exclude<keyof T, N[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, N[number]> }),
  ): readonly string[] => names;
}
