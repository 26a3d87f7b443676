// The layer map of docs/design.md, checked: every import in src/ goes to the importer's own
// folder or to a layer below it (the exceptions are the two the map names). A new import that
// crosses the architecture shows up here, not in a review.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = fileURLToPath(new URL('../../src/', import.meta.url));

/** Each folder's layer, lowest first; table/ and math/ share a rank and must not see each other. */
const RANK: Record<string, number> = {
  config: 0, time: 1, table: 2, math: 2, algorithms: 3,
  rate: 4, policy: 4, concurrency: 4,
  redis: 5, http: 5, pool: 5, cli: 5, observe: 5, index: 6,
};
/** Imports between folders of one rank that the map allows. */
const ALLOWED = new Set(['policy -> rate', 'concurrency -> rate', 'http -> redis']);

/** The folder of a file under src/ (errors.ts sits with config, index.ts on top). */
function folderOf(file: string): string {
  const rel = relative(src, file);
  if (rel === 'errors.ts') return 'config';
  if (rel === 'index.ts') return 'index';
  return rel.split('/')[0] as string;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

describe('the layers of src/', () => {
  const edges: { from: string; to: string; file: string }[] = [];
  for (const file of sources(src)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*'(\.{1,2}\/[^']+)'/g)) {
      const target = resolve(dirname(file), m[1] as string).replace(/\.js$/, '.ts');
      edges.push({ from: folderOf(file), to: folderOf(target), file: relative(src, file) });
    }
  }

  it('knows every folder', () => {
    expect(edges.length).toBeGreaterThan(300);
    for (const e of edges) {
      expect(RANK[e.from], e.file).toBeTypeOf('number');
      expect(RANK[e.to], `${e.file} imports from ${e.to}/`).toBeTypeOf('number');
    }
  });

  it('every import goes down the map, or stays in its folder', () => {
    const crossing = edges
      .filter((e) => e.from !== e.to && !((RANK[e.to] as number) < (RANK[e.from] as number)) && !ALLOWED.has(`${e.from} -> ${e.to}`))
      .map((e) => `${e.file}: ${e.from} -> ${e.to}`);
    expect([...new Set(crossing)]).toEqual([]);
  });
});
