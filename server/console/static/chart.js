// Charts drawn as SVG by hand: a sparkline per queue and a larger chart of
// up to two series with a scale. Points are (t seconds, value).

const SVG = 'http://www.w3.org/2000/svg';

function el(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

function path(points, w, h, pad, t0, t1, vmax) {
  if (points.length === 0) return '';
  const span = Math.max(t1 - t0, 1);
  return points.map(([t, v], i) => {
    const x = pad + ((t - t0) / span) * (w - 2 * pad);
    const y = h - pad - (vmax > 0 ? (v / vmax) * (h - 2 * pad) : 0);
    return `${i ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
  }).join(' ');
}

// sparkline returns a small SVG of one series.
export function sparkline(points) {
  const w = 120, h = 26;
  const svg = el('svg', { class: 'spark', viewBox: `0 0 ${w} ${h}`, role: 'img' });
  if (points.length < 2) return svg;
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const vmax = Math.max(1, ...points.map((p) => p[1]));
  svg.append(el('path', { class: 'line', d: path(points, w, h, 2, t0, t1, vmax) }));
  return svg;
}

// chart returns an SVG of up to two series sharing a scale, with the
// maximum written on the axis.
export function chart(series) {
  const w = 1000, h = 170, pad = 18;
  const svg = el('svg', { class: 'chart', viewBox: `0 0 ${w} ${h}`, role: 'img' });
  svg.append(el('line', { class: 'axis', x1: pad, y1: h - pad, x2: w - pad, y2: h - pad }));
  const pts = series.flatMap((s) => s.points);
  if (pts.length < 2) return svg;
  const t0 = Math.min(...pts.map((p) => p[0])), t1 = Math.max(...pts.map((p) => p[0]));
  const vmax = Math.max(1, ...pts.map((p) => p[1]));
  series.forEach((s, i) => {
    svg.append(el('path', { class: i ? 'line2' : 'line', d: path(s.points, w, h, pad, t0, t1, vmax) }));
  });
  const top = el('text', { class: 'lbl', x: 2, y: pad - 4 });
  top.textContent = vmax.toLocaleString('en-US');
  const span = el('text', { class: 'lbl', x: w - pad - 70, y: h - 4 });
  span.textContent = `last ${Math.round(t1 - t0)} s`;
  svg.append(top, span);
  return svg;
}

// History keeps a bounded series of samples per key and computes rates.
export class History {
  constructor(max = 60) {
    this.max = max;
    this.m = new Map();
  }

  // add records value v of key at time t (seconds).
  add(key, t, v) {
    let s = this.m.get(key);
    if (!s) this.m.set(key, (s = []));
    s.push([t, v]);
    if (s.length > this.max) s.shift();
  }

  points(key) {
    return this.m.get(key) || [];
  }

  // rate is the change per second over the last two samples.
  rate(key) {
    const s = this.points(key);
    if (s.length < 2) return undefined;
    const [t0, v0] = s[s.length - 2], [t1, v1] = s[s.length - 1];
    return t1 > t0 ? (v1 - v0) / (t1 - t0) : undefined;
  }

  // keep drops every key not in keys.
  keep(keys) {
    for (const k of this.m.keys()) if (!keys.has(k)) this.m.delete(k);
  }
}
