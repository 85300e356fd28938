// Manual compatibility check: drives all 14 queue operations of the
// @alicloud/mns 1.2.0 SDK against a running smqd. Not run by go test.
//
//   npm install @alicloud/mns@1.2.0
//   smqd --in-memory --access-key-id testid --access-key-secret testsecret --listen 127.0.0.1:18090 &
//   SMQD=http://127.0.0.1:18090 node alicloud-mns.js
'use strict';
const MNS = require('@alicloud/mns');
const assert = require('assert');

const client = new MNS('123456', {
  accessKeyId: 'testid', accessKeySecret: 'testsecret',
  endpoint: process.env.SMQD || 'http://127.0.0.1:18090',
});

async function expectError(p, name) {
  try { await p; } catch (e) { assert.strictEqual(e.name, name, e.stack); return e; }
  throw new Error('expected ' + name);
}

(async () => {
  const q = 'sdk-node-' + Date.now();
  let r = await client.createQueue(q, { VisibilityTimeout: 60 });
  assert.strictEqual(r.code, 201);
  r = await client.createQueue(q, { VisibilityTimeout: 60 });
  assert.strictEqual(r.code, 204);
  await expectError(client.createQueue(q, { VisibilityTimeout: 61 }), 'MNSQueueAlreadyExistError');
  r = await client.setQueueAttributes(q, { DelaySeconds: 0, PollingWaitSeconds: 1 });
  assert.strictEqual(r.code, 204);
  r = await client.getQueueAttributes(q);
  assert.strictEqual(r.code, 200);
  assert.strictEqual(r.body.VisibilityTimeout, '60');
  assert.strictEqual(r.body.PollingWaitSeconds, '1');
  r = await client.listQueue('', 1000, 'sdk-node-');
  assert.strictEqual(r.code, 200);
  assert.ok(r.body.some(e => e.QueueURL.endsWith('/queues/' + q)), JSON.stringify(r.body));

  r = await client.sendMessage(q, { MessageBody: 'hello world', Priority: 1 });
  assert.strictEqual(r.code, 201);
  assert.strictEqual(r.body.MessageBodyMD5, '5EB63BBBE01EEED093CB22BB8F5ACDC3');
  await expectError(client.sendMessage(q, { MessageBody: 'x', Priority: 0 }), 'MNSInvalidArgumentError');
  await expectError(client.sendMessage(q, { MessageBody: 'a < b' }), 'MNSMalformedXMLError');
  r = await client.batchSendMessage(q, [{ MessageBody: 'b1' }, { MessageBody: 'b2', Priority: 16 }]);
  assert.strictEqual(r.code, 201);
  assert.strictEqual(r.body.length, 2);

  r = await client.peekMessage(q);
  assert.strictEqual(r.code, 200);
  assert.strictEqual(r.body.MessageBody, 'hello world');
  r = await client.batchPeekMessage(q, 16);
  assert.strictEqual(r.code, 200);
  assert.strictEqual(r.body.length, 3);

  r = await client.receiveMessage(q, 1);
  assert.strictEqual(r.code, 200);
  assert.strictEqual(r.body.MessageBody, 'hello world');
  const handle = r.body.ReceiptHandle;
  r = await client.changeMessageVisibility(q, handle, 100);
  assert.strictEqual(r.code, 200);
  const handle2 = r.body.ReceiptHandle;
  await expectError(client.deleteMessage(q, handle), 'MNSMessageNotExistError');
  r = await client.deleteMessage(q, handle2);
  assert.strictEqual(r.code, 204);

  r = await client.batchReceiveMessage(q, 16, 1);
  assert.strictEqual(r.code, 200);
  assert.strictEqual(r.body.length, 2);
  const hs = r.body.map(m => m.ReceiptHandle);
  r = await client.batchDeleteMessage(q, hs);
  assert.strictEqual(r.code, 204);
  r = await client.batchDeleteMessage(q, [hs[0], 'garbage']);
  assert.strictEqual(r.code, 404);
  assert.strictEqual(r.body.length, 2, JSON.stringify(r.body));

  const t0 = Date.now();
  await expectError(client.receiveMessage(q, 2), 'MNSMessageNotExistError');
  assert.ok(Date.now() - t0 >= 1900, 'waited ' + (Date.now() - t0));
  await expectError(client.batchReceiveMessage(q, 4), 'MNSMessageNotExistError');
  await expectError(client.peekMessage(q), 'MNSMessageNotExistError');

  r = await client.deleteQueue(q);
  assert.strictEqual(r.code, 204);
  await expectError(client.getQueueAttributes(q), 'MNSQueueNotExistError');
  console.log('@alicloud/mns: all 14 operations OK');
})().catch(e => { console.error(e); process.exit(1); });
