// Every scenario the explorer runs: each .mjs file of this folder but this one, common.mjs and
// helpers named _*.mjs,
// in name order. A scenario module's default export is { name, what, time, setup, threads, check }
// (see docs/testing.md, "Writing a scenario").
import { readdirSync } from 'node:fs';

const files = readdirSync(new URL('.', import.meta.url)).filter((f) => f.endsWith('.mjs') && f !== 'index.mjs' && f !== 'common.mjs' && !f.startsWith('_')).sort();

export const SCENARIOS = await Promise.all(files.map(async (file) => {
  const url = new URL(`./${file}`, import.meta.url).href;
  return { url, scenario: (await import(url)).default };
}));
