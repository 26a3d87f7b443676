// The build a run explores: its public exports and the table's layout, loaded once per URL, the
// same way in the controller (for set-up and checks) and in every explored worker.
const libraries = new Map();

/** The modules of the build at `url` (its dist/index.js) that scenarios use. */
export async function libraryOf(url) {
  let lib = libraries.get(url);
  if (lib === undefined) {
    const index = await import(url);
    const layout = await import(new URL('./table/layout.js', url));
    // The HTTP layer's give-backs (internal to the package): the middleware's own calls.
    const { windowGiveBack, spendGiveBack, markedTryAcquire } = await import(new URL('./rate/rate-limiter.js', url));
    lib = { ...index, layout, windowGiveBack, spendGiveBack, markedTryAcquire };
    libraries.set(url, lib);
  }
  return lib;
}
