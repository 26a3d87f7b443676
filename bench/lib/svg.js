// A small line chart as a standalone SVG string: no browser, no dependency.

const COLORS = ['#1f77b4', '#d62728', '#7f7f7f', '#2ca02c', '#9467bd'];

/**
 * series: [{ name, points: [[x, y], ...] }]. x values are categories (drawn evenly spaced);
 * y starts at 0. Returns the SVG text.
 */
export function lineChart({ title, xLabel, yLabel, series, width = 680, height = 360 }) {
  const m = { top: 40, right: 170, bottom: 50, left: 70 };
  const w = width - m.left - m.right;
  const h = height - m.top - m.bottom;
  const xs = [...new Set(series.flatMap((s) => s.points.map(([x]) => x)))].sort((a, b) => a - b);
  const yMax = niceCeil(Math.max(...series.flatMap((s) => s.points.map(([, y]) => y))));
  const px = (x) => m.left + (xs.length === 1 ? w / 2 : (xs.indexOf(x) / (xs.length - 1)) * w);
  const py = (y) => m.top + h - (y / yMax) * h;
  const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${width / 2}" y="22" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  for (let i = 0; i <= 5; i++) {
    const y = (yMax * i) / 5;
    out.push(`<line x1="${m.left}" x2="${m.left + w}" y1="${py(y)}" y2="${py(y)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.left - 8}" y="${py(y) + 4}" text-anchor="end">${esc(short(y))}</text>`);
  }
  for (const x of xs) out.push(`<text x="${px(x)}" y="${m.top + h + 18}" text-anchor="middle">${esc(x)}</text>`);
  out.push(`<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${m.top + h}" stroke="#333"/>`);
  out.push(`<line x1="${m.left}" x2="${m.left + w}" y1="${m.top + h}" y2="${m.top + h}" stroke="#333"/>`);
  out.push(`<text x="${m.left + w / 2}" y="${height - 10}" text-anchor="middle">${esc(xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${m.top + h / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2.5" points="${pts}"/>`);
    for (const [x, y] of s.points) out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3.5" fill="${color}"/>`);
    const ly = m.top + 10 + i * 20;
    out.push(`<line x1="${m.left + w + 16}" x2="${m.left + w + 40}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2.5"/>`);
    out.push(`<text x="${m.left + w + 46}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const f of [1, 2, 2.5, 5, 10]) if (f * p >= v) return f * p;
  return 10 * p;
}

function short(v) {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(1)}`;
}
