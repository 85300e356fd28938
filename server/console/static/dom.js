// Small DOM helpers. Text always goes in as text nodes (never innerHTML):
// queue names and message bodies come from other people.

// h builds an element: h('td', {class: 'num'}, 'text', child, ...).
// Attributes named on* are refused: handlers are added with listen().
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) throw new Error('h: use listen() for ' + k);
    el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// listen adds an event handler and returns the element.
export function listen(el, event, fn) {
  el.addEventListener(event, fn);
  return el;
}

// replace empties el and puts children in.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// fmt formats a count.
export function fmt(n) {
  return n === undefined || n === null || Number.isNaN(n) ? '–' : Number(n).toLocaleString('en-US');
}

// fmtRate formats a per-second rate with a sign.
export function fmtRate(r) {
  if (r === undefined || r === null || !Number.isFinite(r)) return '–';
  const s = Math.abs(r) >= 10 ? r.toFixed(0) : r.toFixed(1);
  return (r > 0 ? '+' : '') + s + '/s';
}

// fmtTime formats epoch milliseconds.
export function fmtTime(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–';
}
