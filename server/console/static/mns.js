// A client of the MNS queue API (signature version 2), as the SDKs are:
// every request is signed in the browser with WebCrypto's HMAC-SHA1 under
// the user's access key secret. The console has no other way in: counts,
// attributes and messages all come from these signed calls.
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
  constructor(status, code, message, requestId) {
    super(code ? `${code}: ${message}` : message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

function b64(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s);
}

// xmlEscape escapes text for an XML element.
export function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
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

const QUEUE_INTS = ['DelaySeconds', 'MaximumMessageSize', 'MessageRetentionPeriod', 'VisibilityTimeout',
  'PollingWaitSeconds', 'ActiveMessages', 'InactiveMessages', 'DelayMessages', 'CreateTime', 'LastModifyTime'];

function queueInfo(f) {
  const q = { ...f };
  for (const k of QUEUE_INTS) if (k in q) q[k] = Number(q[k]);
  if ('LoggingEnabled' in q) q.LoggingEnabled = /^true$/i.test(q.LoggingEnabled);
  return q;
}

function message(f) {
  const m = { ...f };
  for (const k of ['EnqueueTime', 'FirstDequeueTime', 'NextVisibleTime', 'DequeueCount', 'Priority']) {
    if (k in m) m[k] = Number(m[k]);
  }
  return m;
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
  async request(method, resource, { body, headers = {} } = {}) {
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
    const resp = await fetch(this.base + resource, init);
    const text = await resp.text();
    const json = (resp.headers.get('Content-Type') || '').startsWith('application/json');
    const doc = text && !json ? new DOMParser().parseFromString(text, 'application/xml') : null;
    if (resp.status >= 300) {
      const e = doc && all(doc, 'Error')[0];
      const f = e ? fields(e) : {};
      throw new MNSError(resp.status, f.Code || '', f.Message || `HTTP ${resp.status}`, f.RequestId || resp.headers.get('x-mns-request-id'));
    }
    return { status: resp.status, doc, text };
  }

  // cluster returns GET /cluster's document (a cluster node's view:
  // members, and per shard its leader, term, indexes and followers' lag).
  async cluster() {
    const { text } = await this.request('GET', '/cluster');
    return JSON.parse(text);
  }

  // listQueues returns {queues: [{QueueName, ActiveMessages, ...}], next}:
  // one page, with every queue's attributes (x-mns-with-meta).
  async listQueues({ prefix = '', marker = '', limit = 1000 } = {}) {
    const headers = { 'x-mns-with-meta': 'true', 'x-mns-ret-number': String(limit) };
    if (prefix) headers['x-mns-prefix'] = prefix;
    if (marker) headers['x-mns-marker'] = marker;
    const { doc } = await this.request('GET', '/queues', { headers });
    const queues = all(doc, 'Queue').map((el) => {
      const q = queueInfo(fields(el));
      if (!q.QueueName && q.QueueURL) q.QueueName = decodeURIComponent(q.QueueURL.replace(/^.*\/queues\//, ''));
      return q;
    });
    const next = all(doc, 'NextMarker')[0];
    return { queues, next: next ? next.textContent : '' };
  }

  // allQueues follows NextMarker up to max queues.
  async allQueues(max = 5000) {
    let out = [], marker = '';
    do {
      const page = await this.listQueues({ marker });
      out = out.concat(page.queues);
      marker = page.next;
    } while (marker && out.length < max);
    return out;
  }

  async getQueue(name) {
    const { doc } = await this.request('GET', `/queues/${encodeURIComponent(name)}`);
    return queueInfo(fields(all(doc, 'Queue')[0]));
  }

  static queueBody(attrs) {
    let x = `<?xml version="1.0" encoding="UTF-8"?><Queue xmlns="${NS}">`;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === '' || v === undefined || v === null) continue;
      x += `<${k}>${xmlEscape(v)}</${k}>`;
    }
    return x + '</Queue>';
  }

  // createQueue returns true if the queue was created, false if an
  // identical one existed.
  async createQueue(name, attrs = {}) {
    const { status } = await this.request('PUT', `/queues/${encodeURIComponent(name)}`, { body: Client.queueBody(attrs) });
    return status === 201;
  }

  async setQueue(name, attrs) {
    await this.request('PUT', `/queues/${encodeURIComponent(name)}?metaoverride=true`, { body: Client.queueBody(attrs) });
  }

  async deleteQueue(name) {
    await this.request('DELETE', `/queues/${encodeURIComponent(name)}`);
  }

  // send returns {MessageId, MessageBodyMD5}.
  async send(name, body, { priority, delay } = {}) {
    let x = `<?xml version="1.0" encoding="UTF-8"?><Message xmlns="${NS}"><MessageBody>${xmlEscape(body)}</MessageBody>`;
    if (delay !== undefined && delay !== '') x += `<DelaySeconds>${Number(delay)}</DelaySeconds>`;
    if (priority !== undefined && priority !== '') x += `<Priority>${Number(priority)}</Priority>`;
    x += '</Message>';
    const { doc } = await this.request('POST', `/queues/${encodeURIComponent(name)}/messages`, { body: x });
    return fields(all(doc, 'Message')[0]);
  }

  // receive takes up to n messages, waiting up to wait seconds; an empty
  // queue gives [] (MessageNotExist is not an error here).
  async receive(name, { n = 1, wait = 0 } = {}) {
    let q = `/queues/${encodeURIComponent(name)}/messages?numOfMessages=${n}`;
    if (wait > 0) q += `&waitseconds=${wait}`;
    return this.messages(q);
  }

  // peek returns up to n Active messages without changing them.
  async peek(name, n = 16) {
    return this.messages(`/queues/${encodeURIComponent(name)}/messages?peekonly=true&numOfMessages=${n}`);
  }

  async messages(resource) {
    try {
      const { doc } = await this.request('GET', resource);
      return all(doc, 'Message').map((el) => message(fields(el)));
    } catch (e) {
      if (e instanceof MNSError && e.code === 'MessageNotExist') return [];
      throw e;
    }
  }

  async deleteMessage(name, handle) {
    await this.request('DELETE', `/queues/${encodeURIComponent(name)}/messages?ReceiptHandle=${encodeURIComponent(handle)}`);
  }

  // changeVisibility returns {ReceiptHandle, NextVisibleTime}.
  async changeVisibility(name, handle, seconds) {
    const { doc } = await this.request('PUT',
      `/queues/${encodeURIComponent(name)}/messages?ReceiptHandle=${encodeURIComponent(handle)}&VisibilityTimeout=${Number(seconds)}`);
    return message(fields(all(doc, 'ChangeVisibility')[0]));
  }
}
