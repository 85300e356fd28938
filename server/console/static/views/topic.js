// One topic: its attributes (signed GetTopicAttributes, polled), its
// subscriptions (ListSubscriptionByTopic with meta, polled) with a form to
// subscribe a queue of this server or an HTTP(S) endpoint and a button to
// unsubscribe each, a form to publish a message (PublishMessage: body and
// tag) that shows the new MessageId, and delete the topic.
//
// The topic API reports no push statistics (attempts, failures, pushes
// pending): the table shows what each subscription's attributes hold.
// Where a queue subscription delivers is on that queue's page.

import { h, listen, replace, tile, say, confirmed, fmt, fmtTime } from '../dom.js';
import { queueEndpoint } from '../mns.js';

const STRATEGIES = ['BACKOFF_RETRY', 'EXPONENTIAL_DECAY_RETRY'];
const FORMATS = ['XML', 'JSON', 'SIMPLIFIED'];
const QUEUE_ENDPOINT = /^acs:mns:[^:]*:[^:]*:queues\/(.+)$/;

const select = (id, values) => h('select', { id }, values.map((v) => h('option', { value: v }, v)));
const seconds = (s) => fmtTime(s * 1000);

export function topicView({ client, main, every, quiet, describe, attempt }, name) {
  const tiles = {
    messages: tile('topic-messages', 'messages (last day)'),
    size: tile('topic-max-size', 'maximum message size (bytes)'),
    retention: tile('topic-retention', 'retention (s)'),
    logging: tile('topic-logging', 'logging'),
  };
  const times = h('p', { class: 'muted', id: 'topic-times' });
  const status = h('p', { class: 'error', id: 'poll-error', role: 'alert' });

  // Subscriptions.
  const subRows = h('tbody', { id: 'sub-rows' });
  const subCount = h('span', { id: 'sub-count', class: 'muted' });
  const subName = h('input', { id: 'sub-name', placeholder: 'subscription name', required: true });
  const kind = h('select', { id: 'sub-kind' }, h('option', { value: 'queue' }, 'a queue here'), h('option', { value: 'http' }, 'an HTTP(S) endpoint'));
  const queues = h('datalist', { id: 'queue-names' });
  const queue = h('input', { id: 'sub-queue', placeholder: 'queue name', list: 'queue-names' });
  const url = h('input', { id: 'sub-url', placeholder: 'http://host:port/path', size: 30 });
  const queueLabel = h('label', {}, 'Queue', queue, queues);
  const urlLabel = h('label', { hidden: true }, 'Endpoint URL', url);
  const strategy = select('sub-strategy', STRATEGIES);
  const format = select('sub-format', FORMATS);
  const filterTag = h('input', { id: 'sub-tag', placeholder: 'all messages', size: 12 });
  const subForm = h('form', { id: 'subscribe-form', class: 'row' },
    h('label', {}, 'Subscription', subName), h('label', {}, 'Deliver to', kind), queueLabel, urlLabel,
    h('label', {}, 'Retry strategy', strategy), h('label', {}, 'Format', format), h('label', {}, 'Filter tag', filterTag),
    h('button', { class: 'primary', type: 'submit', id: 'subscribe' }, 'Subscribe'));
  const subNote = h('p', { id: 'subscribe-result', role: 'status' });
  const armed = new Set(); // subscriptions whose unsubscribe asks for its second click

  // Publish.
  const body = h('textarea', { id: 'publish-body', placeholder: 'message body' });
  const tag = h('input', { id: 'publish-tag', placeholder: 'none', size: 12 });
  const pubForm = h('form', { id: 'publish-form', class: 'row' },
    h('label', {}, 'Body', body), h('label', {}, 'Tag', tag),
    h('button', { class: 'primary', type: 'submit', id: 'publish' }, 'Publish'));
  const pubNote = h('p', { id: 'publish-result', role: 'status' });

  const delNote = h('p', { id: 'delete-result', role: 'status' });
  const delT = confirmed({
    cls: 'delete-topic', id: 'delete-topic', label: 'Delete topic…', really: `Really delete ${name} and its subscriptions`,
    run: () => attempt(delNote, 'Delete', async () => {
      await quiet(); // no refresh asks for the topic once it is gone
      try {
        await client.deleteTopic(name);
      } catch (e) {
        poll(); // still there (refused, say): keep showing it
        throw e;
      }
      location.hash = '#/topics';
    }),
  });

  replace(main,
    h('h1', {}, 'Topic ', h('span', { class: 'mono', id: 'topic-name' }, name)),
    h('div', { class: 'tiles' }, Object.values(tiles).map((t) => t.el)),
    times,
    status,
    h('h2', {}, 'Publish a message'), pubForm, pubNote,
    h('h2', {}, 'Subscriptions ', subCount),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Subscription'), h('th', {}, 'Endpoint'), h('th', {}, 'Retry strategy'),
      h('th', {}, 'Format'), h('th', {}, 'Filter tag'), h('th', {}, 'Dead letters to'), h('th', {}, 'Created'), h('th', {}, ''))), subRows),
    h('p', { class: 'muted' }, 'A queue subscription gets each message as a new message in its queue, in the subscription\u2019s format ' +
      '(SIMPLIFIED: the body alone); HTTP(S) endpoints get signed pushes, retried by the subscription\u2019s strategy. ' +
      'A filter tag lets through only the messages published with that tag.'),
    h('h2', {}, 'Subscribe'), subForm, subNote,
    h('h2', {}, 'Danger zone'), h('div', { class: 'row' }, delT), delNote);

  // endpointCell links a queue endpoint to its queue's page.
  function endpointCell(ep) {
    const m = QUEUE_ENDPOINT.exec(ep);
    return h('td', { class: 'mono endpoint' }, m ? h('a', { href: '#/queue/' + encodeURIComponent(m[1]) }, ep) : ep);
  }

  function subRow(s) {
    const unsub = confirmed({
      cls: 'unsubscribe', label: 'Unsubscribe…', really: 'Really unsubscribe', key: s.SubscriptionName, armed,
      run: () => attempt(subNote, 'Unsubscribe', async () => {
        await client.unsubscribe(name, s.SubscriptionName);
        say(subNote, true, `Unsubscribed ${s.SubscriptionName}.`);
        await refresh();
      }),
    });
    return h('tr', { 'data-subscription': s.SubscriptionName },
      h('td', {}, s.SubscriptionName), endpointCell(s.Endpoint), h('td', {}, s.NotifyStrategy), h('td', {}, s.NotifyContentFormat),
      h('td', {}, s.FilterTag || '\u2014'), h('td', {}, s.DeadLetterTargetQueue || '\u2014'), h('td', { class: 'time' }, seconds(s.CreateTime)),
      h('td', {}, unsub));
  }

  async function refresh() {
    const [t, subs] = await Promise.all([client.getTopic(name), client.allSubscriptions(name)]);
    tiles.messages.v.textContent = fmt(t.MessageCount);
    tiles.size.v.textContent = fmt(t.MaximumMessageSize);
    tiles.retention.v.textContent = fmt(t.MessageRetentionPeriod);
    tiles.logging.v.textContent = t.LoggingEnabled ? 'on' : 'off';
    times.textContent = `Created ${seconds(t.CreateTime)}, last modified ${seconds(t.LastModifyTime)}.`;
    const names = new Set(subs.map((s) => s.SubscriptionName));
    for (const n of armed) if (!names.has(n)) armed.delete(n);
    subCount.textContent = `(${subs.length})`;
    replace(subRows, subs.length === 0
      ? h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No subscriptions yet.'))
      : subs.map(subRow));
    status.textContent = '';
  }

  // The queue names offered for a queue subscription, read when the
  // field is entered (best effort: a name can always be typed).
  async function offerQueues() {
    try {
      replace(queues, (await client.allQueues()).map((q) => h('option', { value: q.QueueName })));
    } catch {
      // The datalist stays as it was.
    }
  }

  listen(kind, 'change', () => {
    queueLabel.hidden = kind.value !== 'queue';
    urlLabel.hidden = kind.value === 'queue';
  });
  listen(queue, 'focus', offerQueues);

  listen(subForm, 'submit', (ev) => {
    ev.preventDefault();
    const sub = subName.value.trim();
    const endpoint = kind.value === 'queue' ? queueEndpoint(queue.value.trim()) : url.value.trim();
    attempt(subNote, 'Subscribe', async () => {
      const created = await client.subscribe(name, sub,
        { Endpoint: endpoint, NotifyStrategy: strategy.value, NotifyContentFormat: format.value, FilterTag: filterTag.value.trim() });
      say(subNote, true, created ? `Subscribed ${sub} to ${endpoint}.` : `Subscription ${sub} already exists with these attributes.`);
      subName.value = '';
      await refresh();
    });
  });

  listen(pubForm, 'submit', (ev) => {
    ev.preventDefault();
    if (!body.value) {
      say(pubNote, false, 'A message body must not be empty.');
      return;
    }
    attempt(pubNote, 'Publish', async () => {
      const r = await client.publish(name, body.value, { tag: tag.value.trim() });
      say(pubNote, true, `Published: message ${r.MessageId} (body MD5 ${r.MessageBodyMD5}).`);
      await refresh();
    });
  });

  function poll() {
    every(refresh, (e) => { status.textContent = 'Refresh failed: ' + describe(e); });
  }
  poll();
}
