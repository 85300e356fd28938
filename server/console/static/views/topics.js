// Topics: every topic with its message count and settings, polled with
// signed ListTopic calls (with meta: GetTopicAttributes' elements for
// each topic; NextMarker followed); a form to create one (CreateTopic
// with MaximumMessageSize and LoggingEnabled); delete after a second
// click (DeleteTopic: its subscriptions and messages go with it).
//
// Names are not checked here: the API's answer (TopicNameInvalid, ...)
// is what the form shows.

import { h, listen, replace, say, confirmed, fmt, fmtTime } from '../dom.js';

const ROWS = 5000; // topics shown in the table

export function topicsView({ client, main, every, describe, attempt }) {
  const name = h('input', { id: 'new-topic-name', placeholder: 'topic name', required: true });
  const size = h('input', { id: 'new-topic-size', type: 'number', min: 1024, max: 65536, placeholder: '65536' });
  const logging = h('select', { id: 'new-topic-logging' }, h('option', { value: 'false' }, 'off'), h('option', { value: 'true' }, 'on'));
  const note = h('p', { id: 'create-result', role: 'status' });
  const form = h('form', { id: 'create-topic', class: 'row' },
    h('label', {}, 'New topic', name),
    h('label', {}, 'Maximum message size (bytes)', size),
    h('label', {}, 'Logging', logging),
    h('button', { class: 'primary', type: 'submit', id: 'create-topic-button' }, 'Create'));
  const rows = h('tbody', { id: 'topic-rows' });
  const status = h('p', { class: 'error', id: 'poll-error', role: 'alert' });
  const count = h('span', { id: 'topic-count', class: 'muted' });
  const armed = new Set(); // topics whose delete asks for its second click
  replace(main,
    h('h1', {}, 'Topics ', count),
    form, note,
    status,
    h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Topic'), h('th', { class: 'num' }, 'Messages'), h('th', { class: 'num' }, 'Maximum size'),
        h('th', {}, 'Logging'), h('th', {}, 'Created'), h('th', {}, ''))),
      rows),
    h('p', { class: 'muted' }, 'Messages: those published within the topic\u2019s retention period (1 day), pushed or not. ' +
      'Deleting a topic deletes its subscriptions; messages already delivered to queues stay there.'));

  function row(t) {
    const del = confirmed({
      cls: 'delete-topic', label: 'Delete…', really: `Really delete ${t.TopicName} and its subscriptions`, key: t.TopicName, armed,
      run: () => attempt(note, 'Delete', async () => {
        await client.deleteTopic(t.TopicName);
        say(note, true, `Topic ${t.TopicName} deleted.`);
        await refresh();
      }),
    });
    return h('tr', { 'data-topic': t.TopicName },
      h('td', {}, h('a', { href: '#/topic/' + encodeURIComponent(t.TopicName) }, t.TopicName)),
      h('td', { class: 'num messages' }, fmt(t.MessageCount)),
      h('td', { class: 'num' }, fmt(t.MaximumMessageSize)),
      h('td', {}, t.LoggingEnabled ? 'on' : 'off'),
      h('td', {}, fmtTime(t.CreateTime * 1000)),
      h('td', {}, del));
  }

  async function refresh() {
    const topics = await client.allTopics();
    const names = new Set(topics.map((t) => t.TopicName));
    for (const n of armed) if (!names.has(n)) armed.delete(n);
    count.textContent = `(${topics.length})`;
    const more = topics.length - ROWS;
    replace(rows, topics.length === 0
      ? h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No topics yet.'))
      : topics.slice(0, ROWS).map(row).concat(more > 0 ? [h('tr', { id: 'topic-rows-more' }, h('td', { colspan: 6, class: 'muted' },
        `and ${fmt(more)} more topics (counted above; smqctl topic ls lists them all)`))] : []));
    status.textContent = '';
  }

  listen(form, 'submit', (ev) => {
    ev.preventDefault();
    const n = name.value.trim();
    attempt(note, 'Create', async () => {
      const created = await client.createTopic(n, { MaximumMessageSize: size.value, LoggingEnabled: logging.value });
      say(note, true, created ? `Topic ${n} created.` : `Topic ${n} already exists with these attributes.`);
      name.value = '';
      await refresh();
    });
  });

  let shownAt = 0; // when the table was read
  every(async () => { await refresh(); shownAt = Date.now(); }, (e) => {
    const age = shownAt ? ` The table below is from ${new Date(shownAt).toLocaleTimeString()}.` : '';
    status.textContent = 'Refresh failed: ' + describe(e) + age;
  });
}
