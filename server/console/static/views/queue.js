// One queue: live counts (signed GetQueueAttributes, polled), its
// attributes and dead-letter policy to edit (SetQueueAttributes), a test
// message to send, peek, receive, delete by receipt handle, change
// visibility, move dead-lettered messages back (redrive.js), purge its
// messages, delete the queue.

import { h, listen, replace, tile, say, confirmed, fmt, fmtTime } from '../dom.js';
import { chart, History } from '../chart.js';
import { redrive } from '../redrive.js';

const ATTRS = [
  ['VisibilityTimeout', 'Visibility timeout (s)', 1, 43200],
  ['DelaySeconds', 'Delay (s)', 0, 604800],
  ['PollingWaitSeconds', 'Polling wait (s)', 0, 30],
  ['MaximumMessageSize', 'Maximum message size (bytes)', 1024, 65536],
  ['MessageRetentionPeriod', 'Retention (s)', 60, 604800],
];

export function queueView({ client, main, every, quiet, describe, attempt }, name) {
  const hist = new History(80);
  const tiles = {
    active: tile('count-active', 'active'),
    inactive: tile('count-inactive', 'inactive (received)'),
    delayed: tile('count-delayed', 'delayed'),
  };
  const status = h('p', { class: 'error', id: 'poll-error', role: 'alert' });
  const graph = h('div', { id: 'queue-chart' });

  // Attributes.
  const inputs = {};
  const attrForm = h('form', { id: 'attrs-form', class: 'row' },
    ATTRS.map(([k, label, min, max]) => h('label', {}, label,
      (inputs[k] = h('input', { name: k, id: 'attr-' + k, type: 'number', min, max, size: 8 })))),
    h('label', {}, 'Logging', (inputs.LoggingEnabled = h('select', { name: 'LoggingEnabled', id: 'attr-LoggingEnabled' },
      h('option', { value: 'false' }, 'off'), h('option', { value: 'true' }, 'on')))),
    h('label', {}, 'Dead-letter queue (empty: none)',
      (inputs.DeadLetterTargetQueue = h('input', { name: 'DeadLetterTargetQueue', id: 'attr-DeadLetterTargetQueue', size: 16 }))),
    h('label', {}, 'Maximum receives',
      (inputs.MaxReceiveCount = h('input', { name: 'MaxReceiveCount', id: 'attr-MaxReceiveCount', type: 'number', min: 1, size: 4 }))),
    h('button', { type: 'submit', id: 'save-attrs' }, 'Save'));
  const attrNote = h('p', { id: 'attrs-result', role: 'status' });

  // Send.
  const body = h('textarea', { id: 'send-body', placeholder: 'message body' });
  const prio = h('input', { id: 'send-priority', type: 'number', min: 1, max: 16, placeholder: '8', size: 4 });
  const delay = h('input', { id: 'send-delay', type: 'number', min: 0, max: 604800, placeholder: '0', size: 6 });
  const sendForm = h('form', { id: 'send-form', class: 'row' },
    h('label', {}, 'Body', body), h('label', {}, 'Priority', prio), h('label', {}, 'Delay (s)', delay),
    h('button', { class: 'primary', type: 'submit', id: 'send' }, 'Send'));
  const sendNote = h('p', { id: 'send-result', role: 'status' });

  // Peek and receive.
  const peekN = h('input', { id: 'peek-n', type: 'number', min: 1, max: 16, value: 16, size: 4 });
  const peekForm = h('form', { id: 'peek-form', class: 'row' }, h('label', {}, 'Messages', peekN),
    h('button', { type: 'submit', id: 'peek' }, 'Peek'));
  const peekRows = h('tbody', { id: 'peek-rows' });
  const recvN = h('input', { id: 'receive-n', type: 'number', min: 1, max: 16, value: 1, size: 4 });
  const recvWait = h('input', { id: 'receive-wait', type: 'number', min: 0, max: 30, value: 0, size: 4 });
  const recvForm = h('form', { id: 'receive-form', class: 'row' }, h('label', {}, 'Messages', recvN),
    h('label', {}, 'Wait (s)', recvWait), h('button', { type: 'submit', id: 'receive' }, 'Receive'));
  const recvRows = h('tbody', { id: 'received-rows' });
  const msgNote = h('p', { id: 'message-result', role: 'status' });

  // Redrive.
  const rdTo = h('input', { id: 'redrive-to', size: 16, placeholder: 'each to its source' });
  const rdMax = h('input', { id: 'redrive-max', type: 'number', min: 0, size: 6, placeholder: 'all' });
  const rdForm = h('form', { id: 'redrive-form', class: 'row' },
    h('label', {}, 'To queue', rdTo), h('label', {}, 'At most', rdMax),
    h('button', { type: 'submit', id: 'redrive' }, 'Move messages back'));
  const rdNote = h('p', { id: 'redrive-result', role: 'status' });
  const rdLeft = h('tbody', { id: 'redrive-left' });

  const delQ = confirmed({
    cls: 'delete-queue', id: 'delete-queue', label: 'Delete queue…', really: `Really delete ${name} and its messages`,
    run: () => attempt(attrNote, 'Delete', async () => {
      await quiet(); // no refresh asks for the queue once it is gone
      try {
        await client.deleteQueue(name);
      } catch (e) {
        poll(); // still there (refused, say): keep showing it
        throw e;
      }
      location.hash = '#/queues';
    }),
  });

  const purge = confirmed({
    cls: 'purge-queue', id: 'purge-queue', label: 'Purge messages…', really: `Really delete every message of ${name}`,
    run: () => attempt(attrNote, 'Purge', async () => {
      const n = await client.purgeQueue(name);
      say(attrNote, true, `Purged ${n} message(s).`);
      await refresh();
    }),
  });

  replace(main,
    h('h1', {}, 'Queue ', h('span', { class: 'mono', id: 'queue-name' }, name)),
    h('div', { class: 'tiles' }, tiles.active.el, tiles.inactive.el, tiles.delayed.el),
    h('div', { class: 'card' }, h('div', { class: 'legend' }, h('span', { class: 'c1' }, 'active'), h('span', { class: 'c2' }, 'inactive')), graph),
    status,
    h('h2', {}, 'Send a test message'), sendForm, sendNote,
    h('h2', {}, 'Peek'), peekForm,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Message id'), h('th', {}, 'Body'), h('th', { class: 'num' }, 'Priority'),
      h('th', {}, 'Enqueued'), h('th', { class: 'num' }, 'Receives'), h('th', {}, 'Properties'))), peekRows),
    h('h2', {}, 'Receive'), recvForm, msgNote,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Message id'), h('th', {}, 'Body'), h('th', {}, 'Visible again'),
      h('th', {}, ''))), recvRows),
    h('h2', {}, 'Attributes'), attrForm, attrNote,
    h('h2', {}, 'Move dead-lettered messages back'),
    h('p', { class: 'muted' }, 'Each visible message goes to the queue its DLQSourceArn names, or all to the queue given; ',
      'it leaves this queue only once the copy is stored.'),
    rdForm, rdNote,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Left here'), h('th', {}, 'Why'))), rdLeft),
    h('h2', {}, 'Danger zone'), h('div', { class: 'row' }, purge, ' ', delQ));

  // The form follows the queue: every refresh puts the current values in
  // the fields the user has not edited, and Save sends only the edited
  // ones. Once it was filled once and Save wrote every field back, so a
  // change made elsewhere since the page opened (a dead-letter policy set
  // by smqctl) was silently undone (console audit, 2026-12-06).
  // A field is edited while its value differs from the one it was last
  // filled with.
  let shown = {};
  const edited = (k) => k in shown && inputs[k].value !== shown[k];
  function fill(q) {
    const set = (k, v) => {
      if (edited(k)) return;
      inputs[k].value = String(v);
      shown[k] = inputs[k].value;
    };
    for (const [k] of ATTRS) set(k, q[k]);
    set('LoggingEnabled', q.LoggingEnabled ? 'true' : 'false');
    set('DeadLetterTargetQueue', q.DeadLetterTargetQueue || '');
    set('MaxReceiveCount', q.MaxReceiveCount || '');
  }

  async function refresh() {
    const q = await client.getQueue(name);
    const t = Date.now() / 1000;
    tiles.active.v.textContent = fmt(q.ActiveMessages);
    tiles.inactive.v.textContent = fmt(q.InactiveMessages);
    tiles.delayed.v.textContent = fmt(q.DelayMessages);
    hist.add('a', t, q.ActiveMessages);
    hist.add('i', t, q.InactiveMessages);
    replace(graph, chart([{ points: hist.points('a') }, { points: hist.points('i') }]));
    fill(q);
    status.textContent = '';
  }

  listen(attrForm, 'submit', (ev) => {
    ev.preventDefault();
    const attrs = {};
    // An emptied field (or one holding no number) has no value to send:
    // the request would leave the attribute out and change nothing, and
    // the page said "Saved" all the same (console audit, 2026-12-07).
    const empty = ATTRS.filter(([k]) => edited(k) && inputs[k].value === '').map(([, label]) => label);
    if (empty.length) {
      say(attrNote, false, `Nothing saved: ${empty.join(', ')} has no value (an attribute has no default to go back to).`);
      return;
    }
    for (const [k] of ATTRS) if (edited(k)) attrs[k] = inputs[k].value;
    if (edited('LoggingEnabled')) attrs.LoggingEnabled = inputs.LoggingEnabled.value;
    if (edited('DeadLetterTargetQueue') || edited('MaxReceiveCount')) {
      // The policy is one: its two fields go together.
      attrs.DeadLetterTargetQueue = inputs.DeadLetterTargetQueue.value.trim();
      if (attrs.DeadLetterTargetQueue) attrs.MaxReceiveCount = inputs.MaxReceiveCount.value;
      else if (edited('MaxReceiveCount') && !edited('DeadLetterTargetQueue')) {
        say(attrNote, false, 'Nothing saved: Maximum receives belongs to a dead-letter policy; name its dead-letter queue too.');
        return;
      }
    }
    if (Object.keys(attrs).length === 0) {
      say(attrNote, false, 'Nothing to save: no field was changed.');
      return;
    }
    attempt(attrNote, 'Save', async () => {
      await client.setQueue(name, attrs);
      shown = {};
      fill(await client.getQueue(name));
      say(attrNote, true, 'Saved: ' + Object.keys(attrs).join(', ') + '.');
    });
  });

  listen(sendForm, 'submit', (ev) => {
    ev.preventDefault();
    if (!body.value) {
      say(sendNote, false, 'A message body must not be empty.');
      return;
    }
    attempt(sendNote, 'Send', async () => {
      const r = await client.send(name, body.value, { priority: prio.value, delay: delay.value });
      say(sendNote, true, `Sent: message ${r.MessageId} (body MD5 ${r.MessageBodyMD5}).`);
      await refresh();
    });
  });

  listen(peekForm, 'submit', (ev) => {
    ev.preventDefault();
    attempt(msgNote, 'Peek', async () => {
      const msgs = await client.peek(name, Number(peekN.value) || 16);
      replace(peekRows, msgs.length === 0
        ? h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No active message.'))
        : msgs.map((m) => h('tr', { 'data-message': m.MessageId },
          h('td', { class: 'mono' }, m.MessageId), h('td', { class: 'body' }, m.MessageBody),
          h('td', { class: 'num' }, m.Priority), h('td', {}, fmtTime(m.EnqueueTime)), h('td', { class: 'num' }, m.DequeueCount),
          h('td', { class: 'props' }, [...m.UserProperties, ...m.SystemProperties].map((p) => `${p.Name}=${p.Value}`).join('; ')))));
    });
  });

  function receivedRow(m) {
    const vis = h('input', { type: 'number', min: 1, max: 43200, value: 30, size: 5, class: 'vis-seconds' });
    const visibleAt = h('td', {}, fmtTime(m.NextVisibleTime));
    const row = h('tr', { 'data-message': m.MessageId },
      h('td', { class: 'mono' }, m.MessageId), h('td', { class: 'body' }, m.MessageBody), visibleAt,
      h('td', {},
        listen(h('button', { type: 'button', class: 'delete-message' }, 'Delete'), 'click', () => attempt(msgNote, 'Delete', async () => {
          await client.deleteMessage(name, m.ReceiptHandle);
          row.remove();
          say(msgNote, true, `Deleted message ${m.MessageId}.`);
          await refresh();
        })),
        ' ', vis, ' ',
        listen(h('button', { type: 'button', class: 'change-visibility' }, 'Set visibility'), 'click', () => attempt(msgNote, 'Visibility change', async () => {
          const r = await client.changeVisibility(name, m.ReceiptHandle, vis.value);
          m.ReceiptHandle = r.ReceiptHandle;
          visibleAt.textContent = fmtTime(r.NextVisibleTime);
          say(msgNote, true, `Message ${m.MessageId} visible again at ${fmtTime(r.NextVisibleTime)}.`);
        }))));
    return row;
  }

  listen(recvForm, 'submit', (ev) => {
    ev.preventDefault();
    attempt(msgNote, 'Receive', async () => {
      const msgs = await client.receive(name, { n: Number(recvN.value) || 1, wait: Number(recvWait.value) || 0 });
      if (msgs.length === 0) say(msgNote, true, 'No message to receive.');
      else say(msgNote, true, `Received ${msgs.length} message(s); they are invisible to others until deleted or visible again.`);
      for (const m of msgs) recvRows.append(receivedRow(m));
      await refresh();
    });
  });

  listen(rdForm, 'submit', (ev) => {
    ev.preventDefault();
    attempt(rdNote, 'Redrive', async () => {
      const tell = (r) => {
        const where = Object.entries(r.to).map(([q, n]) => `${n} to ${q}`).join(', ');
        let text = `Moved ${r.moved} message(s)${where ? ': ' + where : ''}.`;
        if (r.copied) text += ` ${r.copied} copied but still here (received again before the delete): a later run moves them again.`;
        if (r.resent) text += ` ${r.resent} sent again after a send that may or may not have run: they may be twice at their queue.`;
        if (r.left.length) text += ` ${r.left.length} left here.`;
        say(rdNote, r.left.length === 0, text);
        replace(rdLeft, r.left.map((l) => h('tr', { 'data-message': l.id }, h('td', { class: 'mono' }, l.id), h('td', {}, l.why))));
      };
      try {
        tell(await redrive(client, name, { to: rdTo.value.trim(), max: Number(rdMax.value) || 0, progress: tell }));
      } catch (e) {
        const copied = e && e.redrive ? e.redrive.copied : 0;
        if (copied) throw new Error(`${describe(e)}; ${copied} message(s) copied but still here: a later run moves them again`);
        throw e;
      }
      await refresh();
    });
  });

  function poll() {
    every(refresh, (e) => { status.textContent = 'Refresh failed: ' + describe(e); });
  }
  poll();
}
