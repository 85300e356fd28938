// Access policies (smqd --policy-file) through @alicloud/mns 1.2.0: a key
// whose policy allows SendMessage, ReceiveMessage, DeleteMessage and
// ChangeMessageVisibility on the messages of queues sdk-policy-*, and
// GetQueueAttributes on those queues; nothing else. Run by
// cmd/smqd/sdk_policy_test.go with the administrator key and the limited
// key:
//
//   SMQD_ENDPOINT=... SMQD_ACCESS_KEY_ID=... SMQD_ACCESS_KEY_SECRET=...
//   SMQD_LIMITED_KEY_ID=... SMQD_LIMITED_KEY_SECRET=... node policy.js
//
// It checks that each SDK call maps to the RAM action the service names
// it by (a batch is not its single form), that a refusal reaches the SDK
// as MNSAccessDeniedError with status 403, and that a refused call changed
// nothing.
'use strict';

const MNS = require('@alicloud/mns');
const c = require('./check');
const { eq, ok, rejects, step } = c;

const endpoint = c.env('SMQD_ENDPOINT');
const accountId = '1234567890';
const admin = new MNS(accountId, { accessKeyId: c.env('SMQD_ACCESS_KEY_ID'), accessKeySecret: c.env('SMQD_ACCESS_KEY_SECRET'), endpoint });
const limited = new MNS(accountId, { accessKeyId: c.env('SMQD_LIMITED_KEY_ID'), accessKeySecret: c.env('SMQD_LIMITED_KEY_SECRET'), endpoint });

const q = 'sdk-policy-a';
const other = 'elsewhere';

function denied(action) {
  return e => {
    eq('error name', e.name, 'MNSAccessDeniedError');
    ok('error message says "failed with 403"', String(e.message).includes(' failed with 403. '), e.message);
    ok(`error message names ${action}`, String(e.message).includes(action), e.message);
  };
}

async function counts(name) {
  const a = (await admin.getQueueAttributes(name)).body;
  return [a.ActiveMessages, a.InactiveMessages];
}

(async () => {
  await step('setup (administrator key)', async () => {
    eq('create ' + q, (await admin.createQueue(q)).code, 201);
    eq('create ' + other, (await admin.createQueue(other)).code, 201);
  });

  await step('queue management is refused', async () => {
    await rejects('CreateQueue', limited.createQueue('sdk-policy-new'), denied('mns:CreateQueue'));
    await rejects('SetQueueAttributes', limited.setQueueAttributes(q, { DelaySeconds: 5 }), denied('mns:SetQueueAttributes'));
    await rejects('DeleteQueue', limited.deleteQueue(q), denied('mns:DeleteQueue'));
    await rejects('ListQueue', limited.listQueue('', 10, ''), denied('mns:ListQueue'));
    await rejects('GetQueueAttributes of another queue', limited.getQueueAttributes(other), denied('mns:GetQueueAttributes'));
    eq('GetQueueAttributes of its queue', (await limited.getQueueAttributes(q)).code, 200);
    eq('DelaySeconds unchanged', (await admin.getQueueAttributes(q)).body.DelaySeconds, '0');
    await rejects('the refused create made no queue', admin.getQueueAttributes('sdk-policy-new'), e => eq('error name', e.name, 'MNSQueueNotExistError'));
  });

  let handle;
  await step('its messages', async () => {
    eq('SendMessage', (await limited.sendMessage(q, { MessageBody: 'one' })).code, 201);
    await rejects('BatchSendMessage', limited.batchSendMessage(q, [{ MessageBody: 'a' }, { MessageBody: 'b' }]), denied('mns:BatchSendMessage'));
    await rejects('SendMessage to another queue', limited.sendMessage(other, { MessageBody: 'x' }), denied('mns:SendMessage'));
    eq('counts after the refused sends', await counts(q), ['1', '0']);
    eq('nothing in the other queue', await counts(other), ['0', '0']);
    await rejects('PeekMessage', limited.peekMessage(q), denied('mns:PeekMessage'));
    await rejects('BatchPeekMessage', limited.batchPeekMessage(q, 4), denied('mns:BatchPeekMessage'));
    await rejects('BatchReceiveMessage', limited.batchReceiveMessage(q, 4), denied('mns:BatchReceiveMessage'));
    eq('still active after the refused receives', await counts(q), ['1', '0']);
    const r = await limited.receiveMessage(q);
    eq('ReceiveMessage', r.code, 200);
    eq('the body', r.body.MessageBody, 'one');
    const v = await limited.changeMessageVisibility(q, r.body.ReceiptHandle, 60);
    eq('ChangeMessageVisibility', v.code, 200);
    handle = v.body.ReceiptHandle;
    await rejects('BatchDeleteMessage', limited.batchDeleteMessage(q, [handle]), denied('mns:BatchDeleteMessage'));
    eq('still inactive after the refused batch delete', await counts(q), ['0', '1']);
    eq('DeleteMessage', (await limited.deleteMessage(q, handle)).code, 204);
    eq('gone', await counts(q), ['0', '0']);
  });

  await step('cleanup (administrator key)', async () => {
    eq('delete ' + q, (await admin.deleteQueue(q)).code, 204);
    eq('delete ' + other, (await admin.deleteQueue(other)).code, 204);
  });

  c.done('@alicloud/mns 1.2.0 with a policy');
})().catch(e => c.fail('unexpected exception', [c.show(e)]));
