// `npm run bench` (or `npm run bench:quick`): runs every suite and rewrites bench/RESULTS.md.
import { writeFileSync } from 'node:fs';
import { runCore } from './core.js';
import { runWidth } from './width.js';
import { machine } from './lib/measure.js';

const quick = process.argv.includes('--quick');
const m = machine();
const header = [
  '# sluice benchmark results',
  '',
  `Written by \`npm run bench${quick ? ':quick' : ''}\` on ${m.date}. Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}.`,
  'This machine is shared and noisy: read the ratios measured side by side in one run, not single absolute figures.',
  '',
];
const sections = [];
for (const [name, run] of [['core', runCore], ['width', runWidth]]) {
  console.error(`running ${name} suite${quick ? ' (quick)' : ''}...`);
  sections.push((await run({ quick })).markdown);
}
const text = `${header.join('\n')}${sections.join('\n\n')}\n`;
if (quick) {
  console.log(text); // a smoke run checks that the suites work; it does not overwrite the published figures
} else {
  writeFileSync(new URL('./RESULTS.md', import.meta.url), text);
  console.log(text);
}
