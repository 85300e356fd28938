// HTTP push receivers for the SDK scripts (topic spec §3.4-§3.6): a
// loopback http.createServer that records every push exactly as it came
// (request target, raw header names, body bytes), and checkPush, which
// checks every field of one recorded push and verifies its signature the
// way the official sample receivers do: base64-decode
// x-mns-signing-cert-url, fetch the PEM certificate from that URL, rebuild
// the string to sign from the received headers (exact spellings, like the
// Java sample) and check the RSA-SHA1 signature in Authorization with it.
'use strict';

const http = require('http');
const https = require('https');
const crypto = require('crypto');
const c = require('./check');
const { eq, ok, match, between, keys, md5Upper, sleep } = c;

const USER_AGENT = 'Aliyun Notification Service Agent';
const CONTENT_TYPE = {
  XML: 'text/xml;charset=utf-8',
  JSON: 'application/json;charset=utf-8',
  SIMPLIFIED: 'text/plain;charset=utf-8',
};

// receiver starts an HTTP server on 127.0.0.1, port 0. respond(rec, n)
// returns the status for the n-th push (1-based); default 204. The result
// has url(path), got (the recorded pushes, in arrival order), wait(n, ms)
// and close().
async function receiver(respond) {
  const got = [];
  const sockets = new Set();
  let port;
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', d => chunks.push(d));
    req.on('end', () => {
      const rec = {
        method: req.method,
        url: req.url,
        httpVersion: req.httpVersion,
        rawHeaders: req.rawHeaders.slice(),
        body: Buffer.concat(chunks),
        at: Date.now(),
        host: `127.0.0.1:${port}`,
      };
      got.push(rec);
      rec.status = respond ? respond(rec, got.length) : 204;
      res.writeHead(rec.status, { 'Content-Type': 'text/plain' });
      res.end(rec.status >= 300 ? 'no' : '');
    });
  });
  srv.on('connection', s => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  port = srv.address().port;
  return {
    port,
    got,
    url: (path = '') => `http://127.0.0.1:${port}${path}`,
    // wait waits until n pushes arrived or ms passed; returns the count.
    async wait(n, ms) {
      const deadline = Date.now() + ms;
      while (got.length < n && Date.now() < deadline) await sleep(10);
      return got.length;
    },
    // close ends the server and the pusher's kept-alive connections.
    close() {
      for (const s of sockets) s.destroy();
      return new Promise(resolve => srv.close(() => resolve()));
    },
  };
}

// headerMap returns the received headers by their exact spelling, and
// fails on a repeated name (any spelling).
function headerMap(what, rec) {
  const m = {};
  const lower = new Set();
  for (let i = 0; i < rec.rawHeaders.length; i += 2) {
    const k = rec.rawHeaders[i];
    ok(`${what}: header ${k} is sent once`, !lower.has(k.toLowerCase()), rec.rawHeaders);
    lower.add(k.toLowerCase());
    m[k] = rec.rawHeaders[i + 1];
  }
  return m;
}

// get fetches url (http or https) and returns { status, headers, body }.
function get(url) {
  const mod = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    mod.get(url, res => {
      const chunks = [];
      res.on('data', d => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

const xmlEscape = s => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#13;');
const reEscape = s => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const certs = new Map(); // certificate URL -> PEM (receivers cache by URL)

// certificate fetches (once per URL) and checks the signing certificate.
// The URL names the versioned certificate on the node that pushed: smqd's
// endpoint, or in a cluster (c.CLUSTER) any of its nodes: the topic
// shard's leader pushes, signing with its own key and naming its own
// address. The unversioned path of that same node serves it too.
async function certificate(what, url, endpoint) {
  if (certs.has(url)) return certs.get(url);
  const nodes = c.CLUSTER || [endpoint];
  match(`${what}: x-mns-signing-cert-url names the versioned certificate on ${c.CLUSTER ? 'a node of the cluster' : 'smqd'}`, url,
    new RegExp('^(' + nodes.map(reEscape).join('|') + ')/x509_public_certificate-[0-9a-f]{16}\\.pem$'));
  const node = nodes.find(n => url.startsWith(n + '/'));
  const r = await get(url);
  eq(`${what}: GET of the certificate URL (no credentials): status`, r.status, 200);
  eq(`${what}: certificate Content-Type`, r.headers['content-type'], 'application/x-pem-file');
  match(`${what}: a PEM certificate`, r.body, /^-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE-----\n$/);
  const x = new crypto.X509Certificate(r.body);
  eq(`${what}: the certificate's key is RSA`, x.publicKey.asymmetricKeyType, 'rsa');
  eq(`${what}: RSA-2048`, x.publicKey.asymmetricKeyDetails.modulusLength, 2048);
  const plain = await get(`${node}/x509_public_certificate.pem`);
  eq(`${what}: /x509_public_certificate.pem of ${node} serves the same certificate`, plain.body, r.body);
  certs.set(url, r.body);
  return r.body;
}

// checkPush checks one recorded push against w:
//   format     XML, JSON or SIMPLIFIED
//   path       the request target it must have been sent to
//   id         the publish's MessageId; body: the published text as stored
//   tag        the MessageTag, or undefined
//   topic, sub, owner: names in the notification
//   lo, hi     Date.now() before and after the publish
//   endpoint   smqd's endpoint (where the certificate must be served; in
//              a cluster, any node's: certificate)
// It returns { requestId, authorization, stringToSign, date }.
async function checkPush(what, rec, w) {
  eq(`${what}: method`, rec.method, 'POST');
  eq(`${what}: request target (path and query)`, rec.url, w.path);
  const h = headerMap(what, rec);
  const mnsNames = ['x-mns-version', 'x-mns-request-id', 'x-mns-signing-cert-url'];
  if (w.format === 'SIMPLIFIED') {
    mnsNames.push('x-mns-message-id', 'x-mns-topic-owner', 'x-mns-topic-name', 'x-mns-subscriber',
      'x-mns-subscription-name', 'x-mns-publish-time');
    if (w.tag !== undefined) mnsNames.push('x-mns-message-tag');
  }
  // The exact set of names, exactly spelled (spec §0.8, §3.5).
  eq(`${what}: header names, exactly spelled`, Object.keys(h).sort(),
    ['Host', 'User-Agent', 'Content-Length', 'Authorization', 'Content-Type', 'Content-md5', 'Date', ...mnsNames].sort());
  eq(`${what}: Host`, h.Host, rec.host);
  eq(`${what}: Content-Length`, h['Content-Length'], String(rec.body.length));
  eq(`${what}: User-Agent`, h['User-Agent'], USER_AGENT);
  eq(`${what}: Content-Type`, h['Content-Type'], CONTENT_TYPE[w.format]);
  eq(`${what}: Content-md5 = upper-case hex MD5 of the body`, h['Content-md5'],
    crypto.createHash('md5').update(rec.body).digest('hex').toUpperCase());
  match(`${what}: Date (RFC 1123, GMT)`, h.Date, /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$/);
  between(`${what}: Date between the publish and the arrival (ms)`, Date.parse(h.Date), Math.floor(w.lo / 1000) * 1000, rec.at);
  eq(`${what}: x-mns-version`, h['x-mns-version'], '2015-06-06');
  match(`${what}: x-mns-request-id`, h['x-mns-request-id'], c.REQUEST_ID);
  match(`${what}: Authorization is a bare base64 signature (no "MNS " prefix)`, h.Authorization, /^[A-Za-z0-9+/]+={0,2}$/);
  eq(`${what}: Authorization is a 2048-bit signature`, Buffer.from(h.Authorization, 'base64').length, 256);

  // The body (spec §3.4).
  const body = rec.body.toString('utf8');
  const md5 = md5Upper(w.body);
  if (w.format === 'SIMPLIFIED') {
    eq(`${what}: body = the published text, nothing added`, body, w.body);
    eq(`${what}: x-mns-message-id = the publish's MessageId`, h['x-mns-message-id'], w.id);
    eq(`${what}: x-mns-topic-owner`, h['x-mns-topic-owner'], w.owner);
    eq(`${what}: x-mns-subscriber`, h['x-mns-subscriber'], w.owner);
    eq(`${what}: x-mns-topic-name`, h['x-mns-topic-name'], w.topic);
    eq(`${what}: x-mns-subscription-name`, h['x-mns-subscription-name'], w.sub);
    match(`${what}: x-mns-publish-time (Unix ms)`, h['x-mns-publish-time'], /^\d{13}$/);
    between(`${what}: x-mns-publish-time`, h['x-mns-publish-time'], w.lo - 5, w.hi + 5);
    eq(`${what}: x-mns-message-tag`, h['x-mns-message-tag'], w.tag);
  } else if (w.format === 'XML') {
    const re = new RegExp('^' + reEscape('<?xml version="1.0" encoding="utf-8"?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/">' +
      `<TopicOwner>${w.owner}</TopicOwner><TopicName>${w.topic}</TopicName><Subscriber>${w.owner}</Subscriber>` +
      `<SubscriptionName>${w.sub}</SubscriptionName><MessageId>${w.id}</MessageId><Message>${xmlEscape(w.body)}</Message>` +
      `<MessageMD5>${md5}</MessageMD5>` + (w.tag !== undefined ? `<MessageTag>${w.tag}</MessageTag>` : '') +
      '<PublishTime>') + '(\\d{13})</PublishTime></Notification>$');
    match(`${what}: XML notification, compact, in the spec's order`, body, re);
    between(`${what}: XML PublishTime (Unix ms)`, re.exec(body)[1], w.lo - 5, w.hi + 5);
  } else {
    const n = JSON.parse(body);
    const fields = ['TopicOwner', 'TopicName', 'Subscriber', 'SubscriptionName', 'MessageId', 'Message', 'MessageMD5'];
    if (w.tag !== undefined) fields.push('MessageTag');
    fields.push('PublishTime');
    eq(`${what}: JSON keys, in the spec's order`, Object.keys(n), fields);
    eq(`${what}: JSON TopicOwner`, n.TopicOwner, w.owner);
    eq(`${what}: JSON TopicName`, n.TopicName, w.topic);
    eq(`${what}: JSON Subscriber`, n.Subscriber, w.owner);
    eq(`${what}: JSON SubscriptionName`, n.SubscriptionName, w.sub);
    eq(`${what}: JSON MessageId`, n.MessageId, w.id);
    eq(`${what}: JSON Message`, n.Message, w.body);
    eq(`${what}: JSON MessageMD5`, n.MessageMD5, md5);
    if (w.tag !== undefined) eq(`${what}: JSON MessageTag`, n.MessageTag, w.tag);
    ok(`${what}: JSON PublishTime is a number`, typeof n.PublishTime === 'number', n.PublishTime);
    between(`${what}: JSON PublishTime (Unix ms)`, n.PublishTime, w.lo - 5, w.hi + 5);
    // Compact, <>& not \u-escaped: the bytes are exactly these.
    const want = '{' + fields.map(k => `${JSON.stringify(k)}:${JSON.stringify(n[k])}`).join(',') + '}';
    eq(`${what}: JSON bytes (compact, nothing \\u-escaped)`, body, want);
  }

  // The signature (spec §3.6), verified like the official samples.
  const certURL = Buffer.from(h['x-mns-signing-cert-url'], 'base64').toString('utf8');
  eq(`${what}: x-mns-signing-cert-url is standard base64`, Buffer.from(certURL, 'utf8').toString('base64'), h['x-mns-signing-cert-url']);
  const pem = await certificate(what, certURL, w.endpoint);
  const mns = [];
  for (let i = 0; i < rec.rawHeaders.length; i += 2) {
    if (rec.rawHeaders[i].startsWith('x-mns-')) mns.push(`${rec.rawHeaders[i].toLowerCase()}:${rec.rawHeaders[i + 1]}\n`);
  }
  mns.sort();
  const sts = `POST\n${h['Content-md5']}\n${h['Content-Type']}\n${h.Date}\n${mns.join('')}${rec.url}`;
  const sig = Buffer.from(h.Authorization, 'base64');
  ok(`${what}: signature verifies (crypto.createVerify('RSA-SHA1') with the fetched certificate)`,
    crypto.createVerify('RSA-SHA1').update(sts, 'utf8').verify(pem, sig), sts);
  ok(`${what}: signature verifies (crypto.verify('sha1'))`, crypto.verify('sha1', Buffer.from(sts, 'utf8'), pem, sig), sts);
  ok(`${what}: and not over another string (the check can fail)`,
    !crypto.verify('sha1', Buffer.from(sts.replace(rec.url, rec.url + 'x'), 'utf8'), pem, sig), sts);
  return { requestId: h['x-mns-request-id'], authorization: h.Authorization, stringToSign: sts, date: h.Date };
}

// messageId returns the topic MessageId a recorded push carries (where
// its format puts it), to match pushes to publishes: the order of pushes
// is not guaranteed.
function messageId(rec, format) {
  const body = rec.body.toString('utf8');
  let m;
  if (format === 'SIMPLIFIED') {
    for (let i = 0; i < rec.rawHeaders.length; i += 2) {
      if (rec.rawHeaders[i].toLowerCase() === 'x-mns-message-id') return rec.rawHeaders[i + 1];
    }
  } else if (format === 'JSON') {
    m = /"MessageId":"([0-9A-F]{32})"/.exec(body);
  } else {
    m = /<MessageId>([0-9A-F]{32})<\/MessageId>/.exec(body);
  }
  return m ? m[1] : undefined;
}

// scenario is the push test both SDK scripts run, through the SDK calls
// in sdk:
//   endpoint                      smqd's endpoint (in a cluster, the node
//                                 the script talks to; any node may push)
//   topics                        [push topic, retry topic], both created
//   subscribe(topic, name, endpoint, strategy, format)   the SDK's subscribe
//   attrs(topic, name)            the SDK's GetSubscriptionAttributes, as an object
//   publish(topic, tag)           the SDK's publish of sdk.text; resolves
//                                 { id, md5 } of the answer
//   text                          the published text as smqd stores it
//   unsubscribe(topic, name)
//
// 1. One subscription per NotifyContentFormat, each with its own receiver,
//    endpoint without a path (-> /notifications), "/" (the same) and a
//    path with a query; receivers answer 204, 201 and 200.
// 2. A subscription with EXPONENTIAL_DECAY_RETRY whose receiver answers
//    500 to the first attempt and 204 to the second.
// Publishes a tagged and an untagged message to the first topic and one
// to the retry topic, checks every push (checkPush), that the retry came
// about 1 s later as a new, newly signed request, and that no receiver got
// anything more in the next 2 s.
async function scenario(sdk) {
  const [t, tr] = sdk.topics;
  if (c.CLUSTER) ok('the endpoint is a node of SMQD_CLUSTER_ENDPOINTS', c.CLUSTER.includes(sdk.endpoint), [sdk.endpoint, c.CLUSTER]);
  const formats = ['XML', 'JSON', 'SIMPLIFIED'];
  const paths = { XML: ['', '/notifications'], JSON: ['/', '/notifications'], SIMPLIFIED: ['/simplified?a=1&b=x%20y', '/simplified?a=1&b=x%20y'] };
  const status = { XML: 204, JSON: 201, SIMPLIFIED: 200 };
  const rx = {};
  let owner;
  for (const f of formats) {
    rx[f] = await receiver(() => status[f]);
    const ep = rx[f].url(paths[f][0]);
    const name = 'push-' + f.toLowerCase();
    await sdk.subscribe(t, name, ep, undefined, f);
    const a = await sdk.attrs(t, name);
    eq(`${f}: Endpoint as subscribed`, a.Endpoint, ep);
    eq(`${f}: NotifyContentFormat`, a.NotifyContentFormat, f);
    eq(`${f}: NotifyStrategy (default)`, a.NotifyStrategy, 'BACKOFF_RETRY');
    ok(`${f}: no DeadLetterTargetQueue element when none is set`, !('DeadLetterTargetQueue' in a), a);
    owner = a.TopicOwner;
  }
  const retry = await receiver((rec, n) => (n === 1 ? 500 : 204));
  await sdk.subscribe(tr, 'retry', retry.url('/retry'), 'EXPONENTIAL_DECAY_RETRY', 'XML');
  eq('retry: NotifyStrategy', (await sdk.attrs(tr, 'retry')).NotifyStrategy, 'EXPONENTIAL_DECAY_RETRY');

  const pubs = {};
  for (const tag of ['tagP', undefined]) {
    const lo = Date.now();
    const r = await sdk.publish(t, tag);
    pubs[r.id] = { id: r.id, tag, lo, hi: Date.now() };
    eq(`publish ${tag ? 'tagged' : 'untagged'}: MessageBodyMD5`, r.md5, md5Upper(sdk.text));
  }
  const rlo = Date.now();
  const rp = await sdk.publish(tr, undefined);
  const rpub = { id: rp.id, lo: rlo, hi: Date.now() };

  for (const f of formats) {
    eq(`${f}: both pushes arrived`, await rx[f].wait(2, 15000), 2);
    const ids = rx[f].got.map(rec => messageId(rec, f));
    eq(`${f}: one push per publish`, [...ids].sort(), Object.keys(pubs).sort());
    for (const [i, rec] of rx[f].got.entries()) {
      const p = pubs[ids[i]];
      await checkPush(`${f} push ${p.tag ? 'tagged' : 'untagged'}`, rec, {
        format: f, path: paths[f][1], id: p.id, body: sdk.text, tag: p.tag, topic: t, sub: 'push-' + f.toLowerCase(),
        owner, lo: p.lo, hi: p.hi, endpoint: sdk.endpoint,
      });
    }
  }

  eq('retry: a second attempt arrived after the 500', await retry.wait(2, 15000), 2);
  const [a1, a2] = retry.got;
  eq('retry: the first attempt was answered 500', a1.status, 500);
  const w = { format: 'XML', path: '/retry', id: rpub.id, body: sdk.text, topic: tr, sub: 'retry', owner, lo: rpub.lo, hi: rpub.hi, endpoint: sdk.endpoint };
  const s1 = await checkPush('retry attempt 1', a1, w);
  const s2 = await checkPush('retry attempt 2', a2, w);
  between('retry: attempt 2 came about 1 s after attempt 1 (ms)', a2.at - a1.at, 800, 15000);
  ok('retry: a new x-mns-request-id', s2.requestId !== s1.requestId, [s1.requestId, s2.requestId]);
  ok('retry: a new Date', s2.date !== s1.date, [s1.date, s2.date]);
  ok('retry: a fresh signature', s2.authorization !== s1.authorization, [s1.authorization, s2.authorization]);
  eq('retry: the same body', a2.body.toString('utf8'), a1.body.toString('utf8'));

  // A 2xx ends a notification: nothing more arrives.
  await sleep(2000);
  for (const f of formats) eq(`${f}: no push after the ${status[f]} answers`, rx[f].got.length, 2);
  eq('retry: no third attempt after the 204', retry.got.length, 2);

  for (const f of formats) await sdk.unsubscribe(t, 'push-' + f.toLowerCase());
  await sdk.unsubscribe(tr, 'retry');
  for (const r of [...Object.values(rx), retry]) await r.close();
}

module.exports = { receiver, checkPush, messageId, scenario, get, xmlEscape };
