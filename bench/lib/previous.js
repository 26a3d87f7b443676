// Compares chosen tables of a new run with the same tables in the previous bench/RESULTS.md: for
// each section named in COMPARED, a table after the section's own lists every row's figure now,
// in the previous run, and the change. Rows are matched on their leading text cells.

/** The sections compared, each with the key columns that name a row and the figures compared. */
export const COMPARED = [
  { section: 'Algorithms: throughput and memory per key', keys: ['configuration'], figures: ['ns/call median', '2 workers checks/s'] },
  { section: 'Contention lab: per-slot CAS against one global mutex and against no synchronisation', keys: ['workload', 'requests', 'workers'], figures: ['CAS', 'mutex'] },
  { section: 'Peers: one thread, existing keys, mostly allowed (1,000 keys, 24-character strings)', keys: ['contestant'], figures: ['ns/call median'] },
  { section: 'Peers: one thread, existing keys, mostly rejected (1,000 keys, 24-character strings)', keys: ['contestant'], figures: ['ns/call median'] },
];

/** The first markdown table under `## title` in `md`: its header cells and rows of cells. */
function tableOf(md, title) {
  const start = md.indexOf(`\n## ${title}\n`);
  if (start < 0) return null;
  const end = md.indexOf('\n## ', start + 1);
  const lines = md.slice(start, end < 0 ? undefined : end).split('\n');
  const at = lines.findIndex((l) => l.startsWith('|'));
  if (at < 0) return null;
  const cells = (l) => l.split('|').slice(1, -1).map((c) => c.trim());
  const header = cells(lines[at]);
  const rows = [];
  for (let i = at + 2; i < lines.length && lines[i].startsWith('|'); i++) rows.push(cells(lines[i]));
  return { header, rows };
}

const number = (cell) => Number(cell.replace(/[,*x%]/g, ''));

/**
 * `md` with, after each compared section's table, a table of its rows against `previousMd`
 * (rows or sections missing from either side are left out and counted).
 */
export function withPrevious(md, previousMd, previousDate) {
  let out = md;
  for (const spec of COMPARED) {
    const now = tableOf(md, spec.section);
    const before = tableOf(previousMd, spec.section);
    if (now === null || before === null) continue;
    const index = (t, names) => names.map((n) => t.header.indexOf(n));
    const keyNow = index(now, spec.keys);
    const keyBefore = index(before, spec.keys);
    const figNow = index(now, spec.figures);
    const figBefore = index(before, spec.figures);
    if ([...keyNow, ...keyBefore, ...figNow, ...figBefore].some((i) => i < 0)) continue;
    const old = new Map(before.rows.map((r) => [keyBefore.map((i) => r[i]).join(' | '), r]));
    const lines = ['', `Against the previous run (${previousDate}), row by row:`, ''];
    lines.push(`| ${spec.keys.join(' | ')} | ${spec.figures.map((f) => `${f}: now | previous | now / previous`).join(' | ')} |`);
    lines.push(`|${spec.keys.map(() => '---').join('|')}|${spec.figures.map(() => '---:|---:|---:').join('|')}|`);
    let missing = 0;
    for (const r of now.rows) {
      const key = keyNow.map((i) => r[i]).join(' | ');
      const o = old.get(key);
      if (o === undefined) { missing++; continue; }
      const parts = spec.figures.map((_, j) => {
        const a = number(r[figNow[j]]);
        const b = number(o[figBefore[j]]);
        return `${r[figNow[j]]} | ${o[figBefore[j]]} | ${Number.isFinite(a / b) ? `${(a / b).toFixed(2)}x` : '-'}`;
      });
      lines.push(`| ${key} | ${parts.join(' | ')} |`);
    }
    if (missing > 0) lines.push('', `${missing} row(s) new in this run (not in the previous one).`);
    // After the section's first table.
    const start = out.indexOf(`\n## ${spec.section}\n`);
    const tableStart = out.indexOf('\n|', start);
    let tableEnd = tableStart + 1;
    while (out.startsWith('|', tableEnd)) tableEnd = out.indexOf('\n', tableEnd) + 1;
    out = `${out.slice(0, tableEnd - 1)}\n${lines.join('\n')}${out.slice(tableEnd - 1)}`;
  }
  return out;
}

/** The date line of a RESULTS.md ("Written by ... on DATE in ..."), or 'unknown'. */
export function dateOf(md) {
  return /Written by `[^`]*` on (\S+)/.exec(md)?.[1] ?? 'unknown';
}

/** The line under a section's heading that marks it as recorded elsewhere (another machine), by hand. */
export const KEPT_MARK = '<!-- recorded on another machine: `npm run bench` keeps this section as it is -->';

/**
 * The sections of `previousMd` marked KEPT_MARK (each from its `## ` heading to the next), joined:
 * a full run on this host cannot measure them again, so it carries them over unchanged.
 */
export function keptSections(previousMd) {
  const parts = previousMd.split(/\n(?=## )/);
  return parts.filter((p) => p.startsWith('## ') && p.split('\n', 2)[1] === KEPT_MARK).map((p) => p.trimEnd()).join('\n\n');
}
