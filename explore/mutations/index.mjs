// Bugs that attacks once found, re-planted in a copy of dist/ (npm run explore -- --mutations):
// each is its fix reverted as a text edit of the built JavaScript, with the scenario that finds
// it. Every other .mjs file of this folder exports (default) a list of
//   { name, what, scenario, edits: [{ file (under dist/), from (text found exactly once), to }],
//     deep? }
// `deep: true` runs the scenario with the deep bounds (the bug needs more than CI's), `budgetS` its
// DFS for that long.
import { readdirSync } from 'node:fs';

const files = readdirSync(new URL('.', import.meta.url)).filter((f) => f.endsWith('.mjs') && f !== 'index.mjs').sort();

export const MUTATIONS = (await Promise.all(files.map(async (file) => (await import(new URL(`./${file}`, import.meta.url).href)).default))).flat();
