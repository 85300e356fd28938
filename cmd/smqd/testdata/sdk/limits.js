// Refused bodies as Node clients see them: the SDKs and Node's own http
// client write the whole request body before they read the answer, so a
// server that answers early and closes can make them fail with ECONNRESET
// or EPIPE instead of the answer. smqd drains a refused body before it
// answers (server/body.go); this script checks that every client gets the
// MNS error for:
//
//   - a send over the body cap (3 MiB against the default 2 MiB), signed:
//     400 InvalidArgument;
//   - the same with a wrong secret: 403 SignatureDoesNotMatch (the
//     signature is checked first, on the headers);
//   - a raw Node http request with no Authorization and a 3 MiB body:
//     400 MissingAuthorizationHeader;
//   - a send whose Content-MD5 does not match its body (a captured request
//     replayed with another body): 400 InvalidDegist.
//
// Run by cmd/smqd/sdk_test.go with SMQD_ENDPOINT (http or https; for https
// NODE_EXTRA_CA_CERTS names the test's self-signed certificate),
// SMQD_ACCESS_KEY_ID and SMQD_ACCESS_KEY_SECRET.
'use strict';

const crypto = require('crypto');
const http = require('http');
const https = require('https');
const MNS = require('@alicloud/mns');
const AliMNS = require('ali-mns');
const c = require('./check');
const { eq, ok, match, rejects, step } = c;

const endpoint = c.env('SMQD_ENDPOINT');
const keyId = c.env('SMQD_ACCESS_KEY_ID');
const secret = c.env('SMQD_ACCESS_KEY_SECRET');
const url = new URL(endpoint);
const accountId = '1234567890';
const q = 'limits-' + url.protocol.replace(':', '');
const big = 'x'.repeat(3 << 20); // over the 2 MiB default cap

function mnsError(code, status) {
  return e => {
    eq('error name', e.name, `MNS${code}Error`);
    ok(`error message says "failed with ${status}"`, String(e.message).includes(` failed with ${status}. `), e.message);
  };
}

function aliRejected(code) {
  return e => {
    ok('rejected with an Error document (not a connection error)', e && typeof e === 'object' && e.Error, e);
    eq('Error.Code', e.Error.Code, code);
  };
}

// raw sends one request with Node's http(s) module, writing the whole body
// before reading, and resolves with { status, headers, body } or rejects
// with the socket error.
function raw(method, path, headers, body) {
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request({ method, host: url.hostname, port: url.port, path, headers, agent: false }, res => {
      const chunks = [];
      res.on('data', d => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

(async () => {
  const client = new MNS(accountId, { accessKeyId: keyId, accessKeySecret: secret, endpoint });
  await step('setup', async () => {
    const r = await client.createQueue(q);
    ok('created', r.code === 201 || r.code === 204, r.code);
  });

  await step('@alicloud/mns: body over the cap', async () => {
    await rejects('sendMessage of 3 MiB', client.sendMessage(q, { MessageBody: big }), mnsError('InvalidArgument', 400));
    const bad = new MNS(accountId, { accessKeyId: keyId, accessKeySecret: secret + 'x', endpoint });
    await rejects('sendMessage of 3 MiB with a wrong secret', bad.sendMessage(q, { MessageBody: big }), mnsError('SignatureDoesNotMatch', 403));
    const r = await client.sendMessage(q, { MessageBody: 'small' });
    eq('a send within the cap still works', r.code, 201);
  });

  await step('ali-mns: body over the cap', async () => {
    const a = new AliMNS.Account(accountId, keyId, secret);
    a.setGA(false);
    const mq = new AliMNS.MQ(q, a, new AliMNS.Region(AliMNS.City.Hangzhou));
    mq._urlAttr = `${endpoint}/queues/${q}`;
    mq._url = mq._urlAttr + '/messages';
    await rejects('sendP of 3 MiB', mq.sendP(big), aliRejected('InvalidArgument'));
  });

  await step('Node http: unauthenticated 3 MiB body', async () => {
    const r = await raw('POST', `/queues/${q}/messages`, { 'Content-Type': 'text/xml', 'Content-Length': Buffer.byteLength(big) }, big);
    eq('status', r.status, 400);
    match('body is the MNS error', r.body, /<Code>MissingAuthorizationHeader<\/Code>/);
    eq('connection closed after the answer', r.headers.connection, 'close');
  });

  await step('Node http: Content-MD5 that does not match the body', async () => {
    const body = '<Message><MessageBody>pay mallory</MessageBody></Message>';
    const signedBody = '<Message><MessageBody>pay alice</MessageBody></Message>';
    const md5 = Buffer.from(crypto.createHash('md5').update(signedBody).digest('hex')).toString('base64');
    const date = new Date().toUTCString();
    const path = `/queues/${q}/messages`;
    const sts = `POST\n${md5}\ntext/xml\n${date}\nx-mns-version:2015-06-06\n${path}`;
    const sig = crypto.createHmac('sha1', secret).update(sts).digest('base64');
    const r = await raw('POST', path, {
      'Content-Type': 'text/xml', 'Content-MD5': md5, Date: date, 'x-mns-version': '2015-06-06',
      Authorization: `MNS ${keyId}:${sig}`, 'Content-Length': Buffer.byteLength(body),
    }, body);
    eq('status', r.status, 400);
    match('body is the MNS error', r.body, /<Code>InvalidDegist<\/Code>/);
  });

  await step('cleanup', async () => {
    const r = await client.deleteQueue(q);
    eq('deleted', r.code, 204);
  });
  c.done(`limits over ${url.protocol.replace(':', '')}`);
})().catch(e => c.fail('unexpected exception', [c.show(e)]));
