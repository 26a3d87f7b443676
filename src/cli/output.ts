/**
 * Terminal output for `sluice`: aligned tables, word-wrapped messages and a live progress line.
 * Everything it prints fits in 80 columns.
 *
 * Thread-safety: main thread only (it writes to process streams and keeps timers).
 */

/** The widest line the command prints. */
export const MAX_COLUMNS = 80;

/** A number with thousands separators: `1,234,567`. */
export function fmt(n: number): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

/** One column of a table: its title and which side its cells line up on. */
export interface Column {
  title: string;
  align: 'left' | 'right';
}

/** Lays `rows` out under `columns`, two spaces apart, with a rule under the titles. */
export function table(columns: readonly Column[], rows: readonly (readonly string[])[]): string[] {
  const widths = columns.map((c, i) => Math.max(c.title.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => columns
    .map((c, i) => {
      const cell = cells[i] ?? '';
      const width = widths[i] as number;
      return c.align === 'left' ? cell.padEnd(width) : cell.padStart(width);
    })
    .join('  ')
    .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(columns.map((c) => c.title)), rule, ...rows.map(line)];
}

/** Breaks `text` at spaces into lines of at most `width` columns; later lines get `indent`. */
export function wrap(text: string, width = MAX_COLUMNS, indent = ''): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const next = line === '' ? word : `${line} ${word}`;
    if (next.length <= width || line === '' || line === indent) {
      line = next;
      continue;
    }
    lines.push(line);
    line = `${indent}${word}`;
  }
  lines.push(line);
  return lines.map((l) => (l.length > width ? `${l.slice(0, width - 3)}...` : l));
}

/** Writes `lines` to stdout, one per line. */
export function print(...lines: string[]): void {
  process.stdout.write(lines.map((l) => `${l}\n`).join(''));
}

/** A running progress display; `stop` removes a live line and ends the updates. */
export interface Progress {
  stop(): void;
}

/** How often a terminal's live line is redrawn. */
const TTY_REFRESH_MS = 100;
/** How often a plain progress line is printed when stdout is a file or a pipe. */
const PLAIN_REFRESH_MS = 1_000;

/**
 * Shows `render()` as progress: on a terminal, one line redrawn in place with `\r` every 100 ms;
 * otherwise (a pipe or a file) a plain line every second, so logs stay readable. Whatever is
 * printed after `stop` starts on a fresh line.
 */
export function startProgress(render: () => string, stream: NodeJS.WriteStream = process.stdout): Progress {
  const live = stream.isTTY === true;
  const width = MAX_COLUMNS - 1; // the cursor may sit in the last column without wrapping
  let drawn = false;
  const draw = (): void => {
    const text = render();
    drawn = true;
    if (live) stream.write(`\r${text.slice(0, width).padEnd(width)}`);
    else stream.write(`${text.slice(0, MAX_COLUMNS)}\n`);
  };
  const timer = setInterval(draw, live ? TTY_REFRESH_MS : PLAIN_REFRESH_MS);
  return {
    stop(): void {
      clearInterval(timer);
      // A live line is wiped (what follows takes its place); plain lines get a blank line after.
      if (live) stream.write(`\r${' '.repeat(width)}\r`);
      else if (drawn) stream.write('\n');
    },
  };
}
