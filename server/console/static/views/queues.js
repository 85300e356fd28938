// Queues: every queue with its live counts, the backlog's change per
// second and a sparkline, polled with signed ListQueue calls (with meta:
// the attributes of GetQueueAttributes for each queue); a form to create
// one.

import { h, listen, replace, say, fmt, fmtRate } from '../dom.js';
import { chart, sparkline, History } from '../chart.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,255}$/;
const ROWS = 5000; // queues shown in the table

export function queuesView({ client, main, every, describe, attempt }) {
  const hist = new History(80);
  const name = h('input', { id: 'new-queue-name', placeholder: 'queue name', required: true });
  const vt = h('input', { id: 'new-queue-visibility', type: 'number', min: 1, max: 43200, placeholder: '30' });
  const note = h('p', { id: 'create-result', role: 'status' });
  const form = h('form', { id: 'create-queue', class: 'row' },
    h('label', {}, 'New queue', name),
    h('label', {}, 'Visibility timeout (s)', vt),
    h('button', { class: 'primary', type: 'submit', id: 'create-queue-button' }, 'Create'));
  const rows = h('tbody', { id: 'queue-rows' });
  const status = h('p', { class: 'error', id: 'poll-error', role: 'alert' });
  const total = h('div', { id: 'total-chart' });
  const count = h('span', { id: 'queue-count', class: 'muted' });
  replace(main,
    h('h1', {}, 'Queues ', count),
    form, note,
    status,
    h('div', { class: 'card' }, h('div', { class: 'legend' }, h('span', { class: 'c1' }, 'backlog, all queues (active + inactive + delayed)')), total),
    h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Queue'), h('th', { class: 'num' }, 'Active'), h('th', { class: 'num' }, 'Inactive'),
        h('th', { class: 'num' }, 'Delayed'), h('th', { class: 'num' }, 'Backlog change'), h('th', {}, 'Backlog'))),
      rows));

  async function refresh() {
    const queues = await client.allQueues();
    const t = Date.now() / 1000;
    const seen = new Set(['*']);
    let sum = 0;
    for (const [i, q] of queues.entries()) {
      const backlog = q.ActiveMessages + q.InactiveMessages + q.DelayMessages;
      sum += backlog;
      if (i < ROWS) { // a sparkline for the rows shown
        hist.add(q.QueueName, t, backlog);
        seen.add(q.QueueName);
      }
    }
    hist.add('*', t, sum);
    hist.keep(seen);
    count.textContent = `(${queues.length})`;
    replace(total, chart([{ points: hist.points('*') }]));
    // Every queue counts; the table shows the first ROWS (a browser
    // table of 100,000 rows redrawn every refresh is unusable), and says
    // so.
    const more = queues.length - ROWS;
    replace(rows, queues.length === 0
      ? h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No queues yet.'))
      : queues.slice(0, ROWS).map((q) => h('tr', { 'data-queue': q.QueueName },
        h('td', {}, h('a', { href: '#/queue/' + encodeURIComponent(q.QueueName) }, q.QueueName)),
        h('td', { class: 'num active' }, fmt(q.ActiveMessages)),
        h('td', { class: 'num inactive' }, fmt(q.InactiveMessages)),
        h('td', { class: 'num delayed' }, fmt(q.DelayMessages)),
        h('td', { class: 'num rate' }, fmtRate(hist.rate(q.QueueName))),
        h('td', {}, sparkline(hist.points(q.QueueName)))))
        .concat(more > 0 ? [h('tr', { id: 'queue-rows-more' }, h('td', { colspan: 6, class: 'muted' },
          `and ${fmt(more)} more queues (counted above; smqctl queue ls lists them all)`))] : []));
    status.textContent = '';
  }

  listen(form, 'submit', (ev) => {
    ev.preventDefault();
    const n = name.value.trim();
    if (!NAME.test(n)) {
      say(note, false, 'A queue name is 1 to 256 letters, digits and hyphens, not starting with a hyphen.');
      return;
    }
    attempt(note, 'Create', async () => {
      const created = await client.createQueue(n, vt.value ? { VisibilityTimeout: vt.value } : {});
      say(note, true, created ? `Queue ${n} created.` : `Queue ${n} already exists with these attributes.`);
      name.value = '';
      await refresh();
    });
  });

  let shownAt = 0; // when the table's counts were read
  every(async () => { await refresh(); shownAt = Date.now(); }, (e) => {
    const age = shownAt ? ` The counts below are from ${new Date(shownAt).toLocaleTimeString()}.` : '';
    status.textContent = 'Refresh failed: ' + describe(e) + age;
  });
}
