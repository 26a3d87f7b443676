// `npm run bench` (or `npm run bench:quick`): runs every suite and rewrites bench/RESULTS.md.
import { writeFileSync } from 'node:fs';
import { runCore } from './core.js';
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
console.error(`running core suite${quick ? ' (quick)' : ''}...`);
const core = await runCore({ quick });
const text = `${header.join('\n')}${core.markdown}\n`;
if (quick) {
  console.log(text); // a smoke run checks that the suites work; it does not overwrite the published figures
} else {
  writeFileSync(new URL('./RESULTS.md', import.meta.url), text);
  console.log(text);
}
