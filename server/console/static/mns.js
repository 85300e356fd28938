// A client of the MNS queue and topic APIs (signature version 2), as the
// SDKs are: every request is signed in the browser with WebCrypto's
// HMAC-SHA1 under the user's access key secret. The console has no other
// way in: counts, attributes, messages and subscriptions all come from
// these signed calls.
//
// Browsers may not set the Date header, so the date goes in x-mns-date,
// which the server reads when Date is absent (spec §2.2), and which is
// signed both as the date line and as an x-mns-* header.

import { md5Hex } from './md5.js';

const VERSION = '2015-06-06';
const NS = 'http://mns.aliyuncs.com/doc/v1/';
const enc = new TextEncoder();

// MNSError is an error answer of the API: its MNS code, HTTP status and
// request id.
export class MNSError extends Error {
  constructor(status, code, message, requestId, doc) {
    super(code ? `${code}: ${message}` : message);
    this.status = status;
    this.code = code;
    this.detail = message; // the server's message, without the code
    this.requestId = requestId;
    this.doc = doc; // the answer (a batch's partial failure is read from it)
  }
}

function b64(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s);
}

// xmlEscape escapes text for an XML element; a CR as a reference, which
// the server's parser keeps (a bare one it reads as a line feed).
export function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#13;');
}

// children returns the child elements of el by local name, as {name: text}.
function fields(el) {
  const out = {};
  for (const c of el.children) out[c.localName] = c.textContent;
  return out;
}

function all(doc, name) {
  return Array.from(doc.getElementsByTagNameNS('*', name));
}

// The numeric elements of the attribute documents (GetQueueAttributes,
// GetTopicAttributes, GetSubscriptionAttributes and the lists with meta).
const INTS = ['DelaySeconds', 'MaximumMessageSize', 'MessageRetentionPeriod', 'VisibilityTimeout',
  'PollingWaitSeconds', 'ActiveMessages', 'InactiveMessages', 'DelayMessages', 'MessageCount', 'CreateTime', 'LastModifyTime',
  'MaxReceiveCount'];

// attrs converts an attribute document's fields: numbers, LoggingEnabled
// (True/False on the wire) a boolean.
function attrs(f) {
  const a = { ...f };
  for (const k of INTS) if (k in a) a[k] = Number(a[k]);
  if ('LoggingEnabled' in a) a.LoggingEnabled = /^true$/i.test(a.LoggingEnabled);
  return a;
}

// nameFrom returns the last path segment of a resource URL (QueueURL,
// TopicURL, SubscriptionURL), decoded.
function nameFrom(url, below) {
  return decodeURIComponent(url.slice(url.lastIndexOf(below) + below.length));
}

// doc returns a request document: root with one element per attribute,
// empty values left out (but an empty DeadLetterTargetQueue, which turns
// the policy off), text escaped.
function doc(root, elems) {
  return `<?xml version="1.0" encoding="UTF-8"?><${root} xmlns="${NS}">${elements(elems)}</${root}>`;
}

function elements(elems) {
  let x = '';
  for (const [k, v] of Object.entries(elems)) {
    if (v === undefined || v === null || v === '' && k !== 'DeadLetterTargetQueue') continue;
    x += `<${k}>${xmlEscape(v)}</${k}>`;
  }
  return x;
}

// props returns a message element's list of properties (list, with item
// elements: UserProperties > PropertyValue, SystemProperties >
// SystemPropertyValue) as [{Name, Value, Type}].
function props(el, list, item) {
  const l = Array.from(el.children).find((c) => c.localName === list);
  return l ? Array.from(l.children).filter((c) => c.localName === item).map(fields) : [];
}

// propsXML is the list element of ps (none if empty).
function propsXML(list, item, ps) {
  if (!ps || ps.length === 0) return '';
  return `<${list}>${ps.map((p) => `<${item}>${elements({ Name: p.Name, Value: p.Value, Type: p.Type })}</${item}>`).join('')}</${list}>`;
}

function message(f) {
  const m = { ...f };
  for (const k of ['EnqueueTime', 'FirstDequeueTime', 'NextVisibleTime', 'DequeueCount', 'Priority']) {
    if (k in m) m[k] = Number(m[k]);
  }
  return m;
}

// errorOf is the MNSError of an error answer (resp, its parsed body doc).
function errorOf(resp, doc) {
  const e = doc && all(doc, 'Error')[0];
  const f = e ? fields(e) : {};
  return new MNSError(resp.status, f.Code || '', f.Message || `HTTP ${resp.status}`, f.RequestId || resp.headers.get('x-mns-request-id'), doc);
}

export class Client {
  // id and secret are the access key; base is the API's origin ('' for the
  // console's own).
  constructor(id, secret, base = '') {
    if (!globalThis.crypto || !crypto.subtle) {
      throw new Error('this page is not a secure context (WebCrypto is off): open the console over HTTPS or on localhost');
    }
    this.id = id;
    this.base = base;
    this.key = crypto.subtle.importKey('raw', enc.encode(secret), { name: 'HMAC', hash: 'SHA-1' }, false, ['sign']);
  }

  // request sends one signed request; resource is the path and query,
  // exactly as sent (and signed). It returns {status, doc} for 2xx and
  // throws MNSError otherwise.
  async request(method, resource, opts = {}) {
    const resp = await this.fetchSigned(method, resource, opts);
    const text = await resp.text();
    const json = (resp.headers.get('Content-Type') || '').startsWith('application/json');
    const doc = text && !json ? new DOMParser().parseFromString(text, 'application/xml') : null;
    if (resp.status >= 300) throw errorOf(resp, doc);
    return { status: resp.status, doc, text };
  }

  // download GETs resource, signed, and returns the response for its body
  // to be streamed (GET /backup); an error answer throws MNSError.
  async download(resource) {
    const resp = await this.fetchSigned('GET', resource);
    if (resp.status >= 300) {
      const text = await resp.text();
      throw errorOf(resp, text ? new DOMParser().parseFromString(text, 'application/xml') : null);
    }
    return resp;
  }

  // fetchSigned sends one signed request and returns fetch's response.
  async fetchSigned(method, resource, { body, headers = {} } = {}) {
    const hdrs = { 'x-mns-version': VERSION, 'x-mns-date': new Date().toUTCString(), ...headers };
    let md5 = '', ctype = '';
    const init = { method, headers: {}, credentials: 'omit', cache: 'no-store', redirect: 'error' };
    if (body !== undefined) {
      const bytes = enc.encode(body);
      md5 = btoa(md5Hex(bytes));
      ctype = 'text/xml;charset=utf-8';
      init.body = bytes;
      init.headers['Content-MD5'] = md5;
      init.headers['Content-Type'] = ctype;
    }
    const names = Object.keys(hdrs).map((k) => k.toLowerCase()).sort();
    const lower = {};
    for (const [k, v] of Object.entries(hdrs)) lower[k.toLowerCase()] = String(v).trim();
    let sts = `${method}\n${md5}\n${ctype}\n${lower['x-mns-date']}\n`;
    for (const n of names) if (n.startsWith('x-mns-')) sts += `${n}:${lower[n]}\n`;
    sts += resource;
    const sig = b64(await crypto.subtle.sign('HMAC', await this.key, enc.encode(sts)));
    Object.assign(init.headers, lower, { Authorization: `MNS ${this.id}:${sig}` });
    return fetch(this.base + resource, init);
  }

  // cluster returns GET /cluster's document (a cluster node's view:
  // members, and per shard its leader, term, indexes and followers' lag).
  async cluster() {
    const { text } = await this.request('GET', '/cluster');
    return JSON.parse(text);
  }

  // list returns one page of a List call with every item's attributes
  // (x-mns-with-meta): {items, next}. item is the element of one entry,
  // url its URL element and below the path segment before its name, name
  // the attribute to fill from the URL when the server sent no meta.
  async list(resource, { item, url, below, name }, { prefix = '', marker = '', limit = 1000 } = {}) {
    const headers = { 'x-mns-with-meta': 'true', 'x-mns-ret-number': String(limit) };
    if (prefix) headers['x-mns-prefix'] = prefix;
    if (marker) headers['x-mns-marker'] = marker;
    const { doc: d } = await this.request('GET', resource, { headers });
    const items = all(d, item).map((el) => {
      const a = attrs(fields(el));
      if (!a[name] && a[url]) a[name] = nameFrom(a[url], below);
      return a;
    });
    const next = all(d, 'NextMarker')[0];
    return { items, next: next ? next.textContent : '' };
  }

  // follow calls page(marker) from the first page on, following
  // NextMarker, until the last page or max items (default: all; a cap of
  // 5,000 once left the rest out of every page's counts and totals without
  // a word: console audit, 2026-12-06).
  static async follow(page, max = Infinity) {
    let out = [], marker = '';
    do {
      const p = await page(marker);
      out = out.concat(p.items);
      marker = p.next;
    } while (marker && out.length < max);
    return out;
  }

  // listQueues returns {items: [{QueueName, ActiveMessages, ...}], next}:
  // one page of ListQueue.
  listQueues(opts) {
    return this.list('/queues', { item: 'Queue', url: 'QueueURL', below: '/queues/', name: 'QueueName' }, opts);
  }

  // allQueues follows NextMarker up to max queues.
  allQueues(max) {
    return Client.follow((marker) => this.listQueues({ marker }), max);
  }

  // attributes GETs resource (Get*Attributes) and returns the attributes
  // in its root element.
  async attributes(resource, root) {
    const { doc: d } = await this.request('GET', resource);
    return attrs(fields(all(d, root)[0]));
  }

  // put sends a root document of attributes a (Create*, Subscribe,
  // Set*Attributes) and returns true on 201 (created), false on 204 (an
  // identical one existed, or a Set).
  async put(resource, root, a) {
    const { status } = await this.request('PUT', resource, { body: doc(root, a) });
    return status === 201;
  }

  getQueue(name) {
    return this.attributes(`/queues/${encodeURIComponent(name)}`, 'Queue');
  }

  // createQueue returns true if the queue was created, false if an
  // identical one existed.
  createQueue(name, a = {}) {
    return this.put(`/queues/${encodeURIComponent(name)}`, 'Queue', a);
  }

  async setQueue(name, a) {
    await this.put(`/queues/${encodeURIComponent(name)}?metaoverride=true`, 'Queue', a);
  }

  // purgeQueue deletes every message of the queue (smqd's PurgeQueue) and
  // returns how many.
  async purgeQueue(name) {
    const { doc: d } = await this.request('DELETE', `/queues/${encodeURIComponent(name)}/messages?purge=true`);
    return Number(fields(all(d, 'PurgeQueue')[0]).PurgedMessages);
  }

  async deleteQueue(name) {
    await this.request('DELETE', `/queues/${encodeURIComponent(name)}`);
  }

  // send returns {MessageId, MessageBodyMD5}.
  async send(name, body, { priority, delay } = {}) {
    return this.post(`/queues/${encodeURIComponent(name)}/messages`, { MessageBody: body, DelaySeconds: delay, Priority: priority });
  }

  // post sends a Message document (SendMessage, PublishMessage) and
  // returns the answer's {MessageId, MessageBodyMD5}.
  async post(resource, message) {
    const { doc: d } = await this.request('POST', resource, { body: doc('Message', message) });
    return fields(all(d, 'Message')[0]);
  }

  // receive takes up to n messages, waiting up to wait seconds; an empty
  // queue gives [] (MessageNotExist is not an error here).
  async receive(name, { n = 1, wait = 0 } = {}) {
    const q = `/queues/${encodeURIComponent(name)}/messages?numOfMessages=${n}&waitseconds=${wait}`;
    return this.messages(q);
  }

  // peek returns up to n Active messages without changing them.
  async peek(name, n = 16) {
    return this.messages(`/queues/${encodeURIComponent(name)}/messages?peekonly=true&numOfMessages=${n}`);
  }

  async messages(resource) {
    try {
      const { doc: d } = await this.request('GET', resource);
      return all(d, 'Message').map((el) => ({
        ...message(fields(el)),
        UserProperties: props(el, 'UserProperties', 'PropertyValue'),
        SystemProperties: props(el, 'SystemProperties', 'SystemPropertyValue'),
      }));
    } catch (e) {
      if (e instanceof MNSError && e.code === 'MessageNotExist') return [];
      throw e;
    }
  }

  // batchSend sends msgs ({MessageBody, Priority, UserProperties,
  // SystemProperties}, 1..16) and returns one entry per message, in order:
  // {MessageId, MessageBodyMD5} if stored, {ErrorCode, ErrorMessage} if
  // not (a partial failure, spec §3.6). A refusal of the whole batch
  // throws.
  async batchSend(name, msgs) {
    const body = `<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="${NS}">${msgs.map((m) => '<Message>' +
      elements({ MessageBody: m.MessageBody, Priority: m.Priority }) +
      propsXML('UserProperties', 'PropertyValue', m.UserProperties) +
      propsXML('SystemProperties', 'SystemPropertyValue', m.SystemProperties) + '</Message>').join('')}</Messages>`;
    let d;
    try {
      ({ doc: d } = await this.request('POST', `/queues/${encodeURIComponent(name)}/messages`, { body }));
    } catch (e) {
      if (!(e instanceof MNSError) || !e.doc || e.doc.documentElement.localName !== 'Messages') throw e;
      d = e.doc;
    }
    const out = Array.from(d.documentElement.children).filter((c) => c.localName === 'Message').map(fields);
    if (out.length !== msgs.length) throw new Error(`BatchSendMessage answer: ${out.length} entries for ${msgs.length} messages`);
    return out;
  }

  // batchDelete deletes the messages of handles (1..16) and returns the
  // handles not deleted, as {handle: MNSError} (spec §3.9).
  async batchDelete(name, handles) {
    const body = `<?xml version="1.0" encoding="UTF-8"?><ReceiptHandles xmlns="${NS}">${handles.map((hd) =>
      `<ReceiptHandle>${xmlEscape(hd)}</ReceiptHandle>`).join('')}</ReceiptHandles>`;
    try {
      await this.request('DELETE', `/queues/${encodeURIComponent(name)}/messages`, { body });
      return {};
    } catch (e) {
      if (!(e instanceof MNSError) || !e.doc || e.doc.documentElement.localName !== 'Errors') throw e;
      const failed = {};
      for (const el of all(e.doc, 'Error')) {
        const f = fields(el);
        failed[f.ReceiptHandle] = new MNSError(e.status, f.ErrorCode, f.ErrorMessage, e.requestId);
      }
      return failed;
    }
  }

  async deleteMessage(name, handle) {
    await this.request('DELETE', `/queues/${encodeURIComponent(name)}/messages?ReceiptHandle=${encodeURIComponent(handle)}`);
  }

  // changeVisibility returns {ReceiptHandle, NextVisibleTime}.
  async changeVisibility(name, handle, seconds) {
    const { doc: d } = await this.request('PUT',
      `/queues/${encodeURIComponent(name)}/messages?ReceiptHandle=${encodeURIComponent(handle)}&VisibilityTimeout=${Number(seconds)}`);
    return message(fields(all(d, 'ChangeVisibility')[0]));
  }

  // Topics (topic spec §2).

  // listTopics returns {items: [{TopicName, MessageCount, ...}], next}:
  // one page of ListTopic.
  listTopics(opts) {
    return this.list('/topics', { item: 'Topic', url: 'TopicURL', below: '/topics/', name: 'TopicName' }, opts);
  }

  // allTopics follows NextMarker up to max topics.
  allTopics(max) {
    return Client.follow((marker) => this.listTopics({ marker }), max);
  }

  // getTopic returns GetTopicAttributes: TopicName, CreateTime and
  // LastModifyTime (Unix seconds), MaximumMessageSize,
  // MessageRetentionPeriod, MessageCount, LoggingEnabled.
  getTopic(name) {
    return this.attributes(`/topics/${encodeURIComponent(name)}`, 'Topic');
  }

  // createTopic returns true if the topic was created, false if an
  // identical one existed.
  createTopic(name, a = {}) {
    return this.put(`/topics/${encodeURIComponent(name)}`, 'Topic', a);
  }

  async deleteTopic(name) {
    await this.request('DELETE', `/topics/${encodeURIComponent(name)}`);
  }

  // listSubscriptions returns {items: [{SubscriptionName, Endpoint,
  // NotifyStrategy, ...}], next}: one page of ListSubscriptionByTopic.
  listSubscriptions(topic, opts) {
    return this.list(`/topics/${encodeURIComponent(topic)}/subscriptions`,
      { item: 'Subscription', url: 'SubscriptionURL', below: '/subscriptions/', name: 'SubscriptionName' }, opts);
  }

  // allSubscriptions follows NextMarker (a topic has at most 100).
  allSubscriptions(topic) {
    return Client.follow((marker) => this.listSubscriptions(topic, { marker }));
  }

  // subscribe takes {Endpoint, NotifyStrategy, NotifyContentFormat,
  // FilterTag}; it returns true if the subscription was created, false
  // if an identical one existed.
  subscribe(topic, name, a) {
    return this.put(`/topics/${encodeURIComponent(topic)}/subscriptions/${encodeURIComponent(name)}`, 'Subscription', a);
  }

  async unsubscribe(topic, name) {
    await this.request('DELETE', `/topics/${encodeURIComponent(topic)}/subscriptions/${encodeURIComponent(name)}`);
  }

  // publish returns {MessageId, MessageBodyMD5}.
  async publish(topic, body, { tag } = {}) {
    return this.post(`/topics/${encodeURIComponent(topic)}/messages`, { MessageBody: body, MessageTag: tag });
  }
}

// queueEndpoint is the subscription endpoint of a queue of this server:
// acs:mns:{region}:{account}:queues/{name}. smqd resolves it by the queue
// name alone (topic spec §0.6); region and account are those of smqd's
// default resource names (engine Options.ARNPrefix).
export function queueEndpoint(queue) {
  return `acs:mns:local:0:queues/${queue}`;
}
