/**
 * For side-by-side benchmarks only (not exported from the package): when `forceLocked` is set,
 * limiters made afterwards decide under a per-key lock even where they could decide without one.
 * The choice is written into the table's header, so every attached instance makes the same one.
 *
 * Thread-safety: read once per construction, on the constructing thread.
 */
export const engineChoice = { forceLocked: false };
