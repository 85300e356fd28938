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

// tile returns a figure's box, el, and its value's element, v (id id),
// which shows '–' until filled.
export function tile(id, label) {
  const v = h('div', { class: 'v', id }, '–');
  return { el: h('div', { class: 'tile' }, v, h('div', { class: 'k' }, label)), v };
}

// say writes a result line: ok in the note style, else as an error.
export function say(el, ok, text) {
  el.className = ok ? 'note' : 'error';
  el.textContent = text;
}

// confirmed returns a danger button that asks once more: its first click
// shows a second button, really, whose click runs run. cls names both
// (cls and cls-confirm), as id does when given. armed, a Set shared across
// redraws, keeps which keys are asking, so that a poll redrawing a table
// does not take the question back.
export function confirmed({ cls, id, label, really, run, key = '', armed = new Set() }) {
  const yes = h('button', { type: 'button', class: `danger ${cls}-confirm`, id: id && id + '-confirm', hidden: !armed.has(key) }, really);
  const ask = h('button', { type: 'button', class: `danger ${cls}`, id }, label);
  listen(ask, 'click', () => {
    armed.add(key);
    yes.hidden = false;
  });
  listen(yes, 'click', () => {
    armed.delete(key);
    run();
  });
  return h('span', { class: 'confirm' }, ask, ' ', yes);
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
