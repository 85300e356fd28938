// Manual compatibility check: ali-mns 2.6.8 through HTTP_PROXY, i.e. with
// absolute-form request targets (spec §1.1, §9.3). Not run by go test.
//
//   npm install ali-mns@2.6.8
//   smqd --in-memory --access-key-id testid --access-key-secret testsecret --listen 127.0.0.1:18090 &
//   HTTP_PROXY=http://127.0.0.1:18090 node ali-mns.js
'use strict';
const AliMNS = require('ali-mns');
const assert = require('assert');

const account = new AliMNS.Account('123456', 'testid', 'testsecret');
account.setGA(false);
const region = new AliMNS.Region(AliMNS.City.Hangzhou);
const mns = new AliMNS.MNS(account, region);

(async () => {
  const name = 'sdk-alimns-' + Date.now();
  let r = await mns.createP(name);  // sends <Queue/>
  assert.strictEqual(r, 201, String(r));
  r = await mns.listP('sdk-alimns-', 10);
  assert.ok(JSON.stringify(r).includes(name), JSON.stringify(r));
  const mq = new AliMNS.MQ(name, account, region);
  r = await mq.getAttrsP();
  assert.strictEqual(r.Queue.QueueName, name);
  r = await mq.setAttrsP({ VisibilityTimeout: 45 });
  r = await mq.getAttrsP();
  assert.strictEqual(r.Queue.VisibilityTimeout, '45');
  r = await mq.sendP('héllo + world', 3);  // base64-encoded by the SDK; Content-MD5 of the raw digest
  assert.ok(r.Message.MessageId, JSON.stringify(r));
  r = await mq.peekP();
  assert.strictEqual(r.Message.MessageBody, 'héllo + world');
  r = await mq.recvP(1);
  assert.strictEqual(r.Message.MessageBody, 'héllo + world');
  r = await mq.reserveP(r.Message.ReceiptHandle, 60);  // ChangeMessageVisibility
  assert.ok(r.ChangeVisibility.ReceiptHandle);
  r = await mq.deleteP(r.ChangeVisibility.ReceiptHandle);
  assert.strictEqual(r, 204, String(r));

  const batch = new AliMNS.MQBatch(name, account, region);
  r = await batch.sendP([new AliMNS.Msg('b1', 8, 0), new AliMNS.Msg('b2', 1, 0)]);
  assert.strictEqual(r.Messages.Message.length, 2, JSON.stringify(r));
  r = await batch.peekP(16);
  assert.strictEqual(r.Messages.Message.length, 2);
  r = await batch.recvP(1, 16);
  const msgs = r.Messages.Message;
  assert.strictEqual(msgs.length, 2);
  assert.strictEqual(msgs[0].MessageBody, 'b2');  // priority 1 first
  r = await batch.deleteP(msgs.map(m => m.ReceiptHandle));
  assert.strictEqual(r, 204, String(r));
  try {
    await batch.recvP(1, 16);
    assert.fail('empty receive succeeded');
  } catch (e) {
    assert.strictEqual(e.Error.Code, 'MessageNotExist', JSON.stringify(e));
  }
  r = await mns.deleteP(name);
  assert.strictEqual(r, 204, String(r));
  console.log('ali-mns (absolute-form via HTTP_PROXY): OK');
})().catch(e => { console.error(e); process.exit(1); });
