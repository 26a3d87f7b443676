/**
 * `f` as a function that runs it at its first call and, at every later one, returns `otherwise`
 * without running it: a spend is given back once, whoever calls its give-back again.
 *
 * Thread-safety: a plain closure; it belongs to the thread that made it.
 */
export function once<T>(f: () => T, otherwise: T): () => T {
  let done = false;
  return () => {
    if (done) return otherwise;
    done = true;
    return f();
  };
}
