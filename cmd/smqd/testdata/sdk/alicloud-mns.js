// @alicloud/mns 1.2.0 against a running smqd, through the SDK's endpoint
// option (spec §9.2). Run by cmd/smqd/sdk_test.go, which starts the daemon
// and passes:
//
//   SMQD_ENDPOINT=http://127.0.0.1:PORT SMQD_ACCESS_KEY_ID=... SMQD_ACCESS_KEY_SECRET=... node alicloud-mns.js
//
// Every queue operation of the SDK is called, and every field it returns is
// checked. The SDK surfaces an <Error> answer as a thrown Error named
// MNS<Code>Error whose message carries the status, request id and host id.
'use strict';

const MNS = require('@alicloud/mns');
const c = require('./check');
const push = require('./push');
const { eq, ok, match, between, keys, rejects, step, checkMessage, checkQueueAttrs, md5Upper, sleep } = c;

const endpoint = c.env('SMQD_ENDPOINT');
const keyId = c.env('SMQD_ACCESS_KEY_ID');
const secret = c.env('SMQD_ACCESS_KEY_SECRET');
const host = new URL(endpoint).host;
const accountId = '1234567890';

const client = new MNS(accountId, { accessKeyId: keyId, accessKeySecret: secret, endpoint });
// A second client, for sends that must wake a receive pending on the first.
const client2 = new MNS(accountId, { accessKeyId: keyId, accessKeySecret: secret, endpoint });

const P = 'alicloud-'; // every queue of this script
const qMain = P + 'main';
const qPrio = P + 'prio';
const qVis = P + 'vis';
const qPoll = P + 'poll';
const listNames = [P + 'list-a', P + 'list-b', P + 'list-c'];

// mnsError returns a check of a thrown SDK error: MNS<Code>Error, with the
// HTTP status, the request id (24 upper-case hex digits) and the host id.
function mnsError(code, status) {
  return e => {
    eq('error name', e.name, `MNS${code}Error`);
    ok(`error message says "failed with ${status}"`, String(e.message).includes(` failed with ${status}. `), e.message);
    match('error message carries the request id', e.message, /requestid: [0-9A-F]{24}, /);
    ok('error message carries the host id http://' + host, String(e.message).includes(`hostid: http://${host}, `), e.message);
  };
}

// timed runs f and returns its result with the local time window around it.
async function timed(f) {
  const lo = Date.now();
  const r = await f();
  return { r, lo, hi: Date.now() };
}

async function attrs(q) {
  return (await client.getQueueAttributes(q)).body;
}

(async () => {
  const tStart = Date.now();
  const sent = {}; // MessageId -> expectations

  await step('CreateQueue', async () => {
    let r = await client.createQueue(qMain, { VisibilityTimeout: 20, LoggingEnabled: 'True' });
    eq('status of a new queue', r.code, 201);
    eq('Location header', r.headers.location, `${endpoint}/queues/${qMain}`);
    eq('no body', r.body, undefined);
    r = await client.createQueue(qMain, { VisibilityTimeout: 20, LoggingEnabled: 'True' });
    eq('status with identical attributes', r.code, 204);
    eq('Location header on 204', r.headers.location, `${endpoint}/queues/${qMain}`);
    await rejects('create with different attributes', client.createQueue(qMain, { VisibilityTimeout: 21 }), mnsError('QueueAlreadyExist', 409));
    await rejects('create with a bad name', client.createQueue('bad_name'), mnsError('InvalidQueueName', 400));
    await rejects('create with a 257-character name', client.createQueue('a'.repeat(257)), mnsError('QueueNameLengthError', 400));
    await rejects('create with VisibilityTimeout 0', client.createQueue(P + 'x', { VisibilityTimeout: 0 }), mnsError('InvalidArgument', 400));
    await rejects('create with MessageRetentionPeriod 59', client.createQueue(P + 'x', { MessageRetentionPeriod: 59 }), mnsError('InvalidArgument', 400));
    for (const q of [qPrio, qVis, qPoll]) {
      r = await client.createQueue(q);
      eq(`status of ${q}`, r.code, 201);
    }
  });

  await step('GetQueueAttributes', async () => {
    const r = await client.getQueueAttributes(qMain);
    eq('status', r.code, 200);
    checkQueueAttrs('Queue', r.body, {
      QueueName: qMain, DelaySeconds: 0, MaximumMessageSize: 65536, MessageRetentionPeriod: 345600,
      VisibilityTimeout: 20, PollingWaitSeconds: 0, ActiveMessages: 0, InactiveMessages: 0, DelayMessages: 0,
      LoggingEnabled: 'True',
    }, tStart, Date.now());
    checkQueueAttrs('defaults of a queue created without attributes', await attrs(qPrio), {
      QueueName: qPrio, DelaySeconds: 0, MaximumMessageSize: 65536, MessageRetentionPeriod: 345600,
      VisibilityTimeout: 30, PollingWaitSeconds: 0, LoggingEnabled: 'False',
    }, tStart, Date.now());
    await rejects('attributes of a missing queue', client.getQueueAttributes(P + 'missing'), mnsError('QueueNotExist', 404));
  });

  await step('SetQueueAttributes', async () => {
    const before = await attrs(qMain);
    const r = await client.setQueueAttributes(qMain, { MaximumMessageSize: 2048, LoggingEnabled: 'False' });
    eq('status', r.code, 204);
    eq('no body', r.body, undefined);
    const a = await attrs(qMain);
    eq('MaximumMessageSize changed', a.MaximumMessageSize, '2048');
    eq('LoggingEnabled changed', a.LoggingEnabled, 'False');
    eq('VisibilityTimeout kept', a.VisibilityTimeout, '20');
    eq('CreateTime kept', a.CreateTime, before.CreateTime);
    ok('LastModifyTime did not go back', Number(a.LastModifyTime) >= Number(before.LastModifyTime), a);
    await rejects('MaximumMessageSize 1023', client.setQueueAttributes(qMain, { MaximumMessageSize: 1023 }), mnsError('InvalidArgument', 400));
    await rejects('PollingWaitSeconds 31', client.setQueueAttributes(qMain, { PollingWaitSeconds: 31 }), mnsError('InvalidArgument', 400));
    eq('a refused Set changed nothing', (await attrs(qMain)).MaximumMessageSize, '2048');
    await rejects('Set on a missing queue', client.setQueueAttributes(P + 'missing', { DelaySeconds: 1 }), mnsError('QueueNotExist', 404));
  });

  await step('ListQueue', async () => {
    for (const q of listNames) await client.createQueue(q);
    const urls = listNames.map(n => ({ QueueURL: `${endpoint}/queues/${n}` }));
    let r = await client.listQueue('', 1000, P + 'list-');
    eq('status', r.code, 200);
    eq('queues with the prefix, by name, each with its QueueURL', r.body, urls);
    // listQueue() keeps only the Queue list of the answer (it drops
    // NextMarker), so paging is checked on the raw answer through the
    // SDK's own signed get().
    r = await client.get('/queues', 'Queues', { headers: { 'x-mns-ret-number': 2, 'x-mns-prefix': P + 'list-' } });
    keys('first page of 2', r.body, ['Queue', 'NextMarker']);
    eq('first page', r.body.Queue, urls.slice(0, 2));
    ok('NextMarker is not empty', typeof r.body.NextMarker === 'string' && r.body.NextMarker.length > 0, r.body);
    const marker = r.body.NextMarker;
    r = await client.get('/queues', 'Queues', { headers: { 'x-mns-ret-number': 2, 'x-mns-prefix': P + 'list-', 'x-mns-marker': marker } });
    keys('last page (no NextMarker)', r.body, ['Queue']);
    eq('last page', r.body.Queue, urls.slice(2));
    r = await client.listQueue(marker, 2, P + 'list-');
    eq('listQueue(marker, 2, prefix) continues at the marker', r.body, urls.slice(2));
    const seen = [];
    let m;
    for (let i = 0; i < 5; i++) {
      const h = { 'x-mns-ret-number': 1, 'x-mns-prefix': P + 'list-' };
      if (m) h['x-mns-marker'] = m;
      r = await client.get('/queues', 'Queues', { headers: h });
      seen.push(...r.body.Queue);
      m = r.body.NextMarker;
      if (!m) break;
    }
    eq('paging one by one with NextMarker visits every queue once', seen, urls);
    r = await client.listQueue('', 10, P + 'none-');
    eq('status of an empty list', r.code, 200);
    eq('an empty list has no Queue', r.body, undefined);
    await rejects('x-mns-ret-number 1001', client.listQueue('', 1001, P), mnsError('InvalidArgument', 400));
    await rejects('x-mns-ret-number 0', client.listQueue('', 0, P), mnsError('InvalidArgument', 400));
  });

  await step('SendMessage', async () => {
    const bodies = [
      // [what the SDK sends, what is stored and returned, its MD5]
      // (the two literal MD5s are values of the real service, spec §7.2)
      ['hello world', 'hello world', '5EB63BBBE01EEED093CB22BB8F5ACDC3'],
      ['I am 测试字符串.', 'I am 测试字符串.', '9D75198CAA17528AB23790C1861987AF'],
      // @alicloud/mns does not escape bodies: escaped text is the caller's job.
      ['a &lt; b &amp;&amp; c &gt; d', 'a < b && c > d', md5Upper('a < b && c > d')],
    ];
    for (const [wire, body, sum] of bodies) {
      const { r, lo, hi } = await timed(() => client.sendMessage(qMain, { MessageBody: wire }));
      eq(`status of ${JSON.stringify(wire)}`, r.code, 201);
      keys('send answer', r.body, ['MessageId', 'MessageBodyMD5']);
      match('MessageId', r.body.MessageId, c.MESSAGE_ID);
      eq('MessageBodyMD5 = MD5 of the stored text', r.body.MessageBodyMD5, sum);
      sent[r.body.MessageId] = { id: r.body.MessageId, body, priority: 8, sentLo: lo, sentHi: hi };
    }
    eq('MessageIds are distinct', Object.keys(sent).length, 3);
    await rejects('Priority 0', client.sendMessage(qMain, { MessageBody: 'x', Priority: 0 }), mnsError('InvalidArgument', 400));
    await rejects('Priority 17', client.sendMessage(qMain, { MessageBody: 'x', Priority: 17 }), mnsError('InvalidArgument', 400));
    await rejects('DelaySeconds 604801', client.sendMessage(qMain, { MessageBody: 'x', DelaySeconds: 604801 }), mnsError('InvalidArgument', 400));
    await rejects('an unescaped "<" in the body', client.sendMessage(qMain, { MessageBody: 'a < b' }), mnsError('MalformedXML', 400));
    await rejects('an empty body', client.sendMessage(qMain, { MessageBody: '' }), mnsError('InvalidArgument', 400));
    await rejects('a body over the queue\'s MaximumMessageSize (2048)', client.sendMessage(qMain, { MessageBody: 'x'.repeat(2049) }), mnsError('InvalidArgument', 400));
    const r = await client.sendMessage(qPrio, { MessageBody: 'y'.repeat(2049) });
    eq('2049 bytes fit the default MaximumMessageSize of another queue', r.code, 201);
    await rejects('send to a missing queue', client.sendMessage(P + 'missing', { MessageBody: 'x' }), mnsError('QueueNotExist', 404));
    const a = await attrs(qMain);
    eq('ActiveMessages after 3 sends and 6 refused ones', a.ActiveMessages, '3');
  });

  await step('PeekMessage', async () => {
    const r = await client.peekMessage(qMain);
    eq('status', r.code, 200);
    const want = sent[r.body.MessageId];
    ok('the peeked MessageId is one that was sent', want !== undefined, r.body);
    checkMessage('peeked message', r.body, { ...want, received: false, dequeueCount: 0 });
  });

  await step('BatchPeekMessage', async () => {
    const r = await client.batchPeekMessage(qMain, 16);
    eq('status', r.code, 200);
    eq('number of messages', r.body.length, 3);
    for (const m of r.body) checkMessage('peeked message', m, { ...sent[m.MessageId], received: false, dequeueCount: 0 });
    eq('every sent message is there once', r.body.map(m => m.MessageId).sort(), Object.keys(sent).sort());
    const r1 = await client.batchPeekMessage(qMain, 1);
    eq('numOfMessages=1 answers a list of 1', r1.body.length, 1);
    await rejects('numOfMessages=17', client.batchPeekMessage(qMain, 17), mnsError('InvalidArgument', 400));
    eq('peeks changed nothing', (await attrs(qMain)).ActiveMessages, '3');
  });

  let handle;
  let received;
  await step('ReceiveMessage', async () => {
    const { r, lo, hi } = await timed(() => client.receiveMessage(qMain));
    eq('status', r.code, 200);
    const want = sent[r.body.MessageId];
    ok('the received MessageId is one that was sent', want !== undefined, r.body);
    checkMessage('received message', r.body, { ...want, received: true, dequeueCount: 1, vt: 20, recvLo: lo, recvHi: hi });
    handle = r.body.ReceiptHandle;
    received = r.body;
    const a = await attrs(qMain);
    eq('ActiveMessages', a.ActiveMessages, '2');
    eq('InactiveMessages', a.InactiveMessages, '1');
  });

  await step('ChangeMessageVisibility', async () => {
    const { r, lo, hi } = await timed(() => client.changeMessageVisibility(qMain, handle, 100));
    eq('status', r.code, 200);
    keys('ChangeVisibility', r.body, ['ReceiptHandle', 'NextVisibleTime']);
    match('new ReceiptHandle', r.body.ReceiptHandle, c.RECEIPT_HANDLE);
    ok('the new handle differs from the old one', r.body.ReceiptHandle !== handle, r.body);
    between('NextVisibleTime = now + 100 s', r.body.NextVisibleTime, lo + 100000 - 5, hi + 100000 + 5);
    const h2 = r.body.ReceiptHandle;
    await rejects('delete with the old handle', client.deleteMessage(qMain, handle), mnsError('MessageNotExist', 404));
    await rejects('change visibility with the old handle', client.changeMessageVisibility(qMain, handle, 10), mnsError('MessageNotExist', 404));
    await rejects('a garbage handle', client.changeMessageVisibility(qMain, 'garbage', 10), mnsError('ReceiptHandleError', 400));
    await rejects('VisibilityTimeout 0', client.changeMessageVisibility(qMain, h2, 0), mnsError('InvalidArgument', 400));
    await rejects('VisibilityTimeout 43201', client.changeMessageVisibility(qMain, h2, 43201), mnsError('InvalidArgument', 400));
    eq('the message is still inactive', (await attrs(qMain)).InactiveMessages, '1');
    const d = await client.deleteMessage(qMain, h2);
    eq('delete with the new handle', d.code, 204);
    eq('no body', d.body, undefined);
    await rejects('delete again with the same handle', client.deleteMessage(qMain, h2), mnsError('MessageNotExist', 404));
    await rejects('delete with a garbage handle', client.deleteMessage(qMain, 'garbage'), mnsError('ReceiptHandleError', 400));
    delete sent[received.MessageId];
  });

  await step('BatchReceiveMessage', async () => {
    const { r, lo, hi } = await timed(() => client.batchReceiveMessage(qMain, 16));
    eq('status', r.code, 200);
    eq('number of messages (the 2 left)', r.body.length, 2);
    for (const m of r.body) {
      checkMessage('received message', m, { ...sent[m.MessageId], received: true, dequeueCount: 1, vt: 20, recvLo: lo, recvHi: hi });
    }
    eq('the 2 messages left', r.body.map(m => m.MessageId).sort(), Object.keys(sent).sort());
    eq('distinct handles', new Set(r.body.map(m => m.ReceiptHandle)).size, 2);
    received = r.body;
    await rejects('numOfMessages=0', client.batchReceiveMessage(qMain, 0), mnsError('InvalidArgument', 400));
  });

  await step('BatchDeleteMessage', async () => {
    const [m1, m2] = received;
    let r = await client.batchDeleteMessage(qMain, [m1.ReceiptHandle]);
    eq('status when every handle is deleted', r.code, 204);
    eq('no body', r.body, undefined);
    // Partial failure: a stale handle, a valid one and garbage.
    r = await client.batchDeleteMessage(qMain, [m1.ReceiptHandle, m2.ReceiptHandle, 'garbage']);
    eq('status of a partial failure', r.code, 404);
    eq('one Error per failed handle', r.body.length, 2);
    keys('Error entry', r.body[0], ['ErrorCode', 'ErrorMessage', 'ReceiptHandle']);
    eq('stale handle ErrorCode', r.body[0].ErrorCode, 'MessageNotExist');
    eq('stale handle echoed', r.body[0].ReceiptHandle, m1.ReceiptHandle);
    ok('ErrorMessage is not empty', r.body[0].ErrorMessage.length > 0, r.body[0]);
    keys('Error entry', r.body[1], ['ErrorCode', 'ErrorMessage', 'ReceiptHandle']);
    eq('garbage handle ErrorCode', r.body[1].ErrorCode, 'ReceiptHandleError');
    eq('garbage handle echoed', r.body[1].ReceiptHandle, 'garbage');
    const a = await attrs(qMain);
    eq('the valid handle of the partial batch was deleted: InactiveMessages', a.InactiveMessages, '0');
    eq('ActiveMessages', a.ActiveMessages, '0');
    await rejects('17 handles', client.batchDeleteMessage(qMain, Array(17).fill(m1.ReceiptHandle)), mnsError('InvalidArgument', 400));
    await rejects('batch delete on a missing queue', client.batchDeleteMessage(P + 'missing', [m1.ReceiptHandle]), mnsError('QueueNotExist', 404));
  });

  await step('BatchSendMessage and Priority', async () => {
    // Drain what the SendMessage step left (the 2049-byte message).
    let d = await client.batchReceiveMessage(qPrio, 16);
    await client.batchDeleteMessage(qPrio, d.body.map(m => m.ReceiptHandle));
    const entries = [
      { MessageBody: 'p16', Priority: 16 },
      { MessageBody: 'p8' },
      { MessageBody: 'p1', Priority: 1 },
    ];
    const { r, lo, hi } = await timed(() => client.batchSendMessage(qPrio, entries));
    eq('status', r.code, 201);
    eq('one entry per message', r.body.length, 3);
    const exp = {};
    r.body.forEach((e, i) => {
      keys(`entry ${i}`, e, ['MessageId', 'MessageBodyMD5']);
      match(`entry ${i} MessageId`, e.MessageId, c.MESSAGE_ID);
      eq(`entry ${i} MessageBodyMD5 (request order)`, e.MessageBodyMD5, md5Upper(entries[i].MessageBody));
      exp[entries[i].MessageBody] = { id: e.MessageId, body: entries[i].MessageBody, priority: entries[i].Priority || 8, sentLo: lo, sentHi: hi };
    });
    const s = await timed(() => client.sendMessage(qPrio, { MessageBody: 'p4', Priority: 4 }));
    exp.p4 = { id: s.r.body.MessageId, body: 'p4', priority: 4, sentLo: s.lo, sentHi: s.hi };
    const order = ['p1', 'p4', 'p8', 'p16'];
    const pk = await client.batchPeekMessage(qPrio, 16);
    eq('batch peek order: highest priority (1) first', pk.body.map(m => m.MessageBody), order);
    pk.body.forEach(m => checkMessage(`peeked ${m.MessageBody}`, m, { ...exp[m.MessageBody], received: false, dequeueCount: 0 }));
    const one = await timed(() => client.receiveMessage(qPrio));
    eq('receive takes priority 1 although it was sent after priority 16', one.r.body.MessageBody, 'p1');
    checkMessage('received p1', one.r.body, { ...exp.p1, received: true, dequeueCount: 1, vt: 30, recvLo: one.lo, recvHi: one.hi });
    const rest = await timed(() => client.batchReceiveMessage(qPrio, 16));
    eq('batch receive order', rest.r.body.map(m => m.MessageBody), order.slice(1));
    rest.r.body.forEach(m => checkMessage(`received ${m.MessageBody}`, m, { ...exp[m.MessageBody], received: true, dequeueCount: 1, vt: 30, recvLo: rest.lo, recvHi: rest.hi }));
    d = await client.batchDeleteMessage(qPrio, [one.r.body, ...rest.r.body].map(m => m.ReceiptHandle));
    eq('batch delete of all 4', d.code, 204);
    const many = Array.from({ length: 17 }, (_, i) => ({ MessageBody: 'm' + i }));
    await rejects('17 entries', client.batchSendMessage(qPrio, many), mnsError('InvalidArgument', 400));
    await rejects('an entry with Priority 0', client.batchSendMessage(qPrio, [{ MessageBody: 'ok' }, { MessageBody: 'bad', Priority: 0 }]), mnsError('InvalidArgument', 400));
    const a = await attrs(qPrio);
    eq('refused batches stored nothing: ActiveMessages', a.ActiveMessages, '0');
    eq('InactiveMessages', a.InactiveMessages, '0');
  });

  await step('Visibility timeout expiry', async () => {
    const s = await timed(() => client.sendMessage(qVis, { MessageBody: 'again' }));
    const want = { id: s.r.body.MessageId, body: 'again', priority: 8, sentLo: s.lo, sentHi: s.hi };
    const first = await timed(() => client.receiveMessage(qVis));
    checkMessage('first receive', first.r.body, { ...want, received: true, dequeueCount: 1, vt: 30, recvLo: first.lo, recvHi: first.hi });
    const ch = await client.changeMessageVisibility(qVis, first.r.body.ReceiptHandle, 1);
    const next = Number(ch.body.NextVisibleTime);
    await rejects('receive while invisible', client.receiveMessage(qVis), mnsError('MessageNotExist', 404));
    await sleep(Math.max(0, next - Date.now()) + 20);
    const second = await timed(() => client.receiveMessage(qVis, 5));
    checkMessage('second receive', second.r.body, {
      ...want, received: true, dequeueCount: 2, vt: 30, recvLo: second.lo, recvHi: second.hi,
      firstDequeueTime: first.r.body.FirstDequeueTime,
    });
    ok('a new handle', second.r.body.ReceiptHandle !== ch.body.ReceiptHandle && second.r.body.ReceiptHandle !== first.r.body.ReceiptHandle, second.r.body);
    await rejects('the expired handle', client.deleteMessage(qVis, ch.body.ReceiptHandle), mnsError('MessageNotExist', 404));
    eq('delete with the new handle', (await client.deleteMessage(qVis, second.r.body.ReceiptHandle)).code, 204);
  });

  await step('DelaySeconds', async () => {
    const s = await timed(() => client.sendMessage(qVis, { MessageBody: 'later', DelaySeconds: 1 }));
    let a = await attrs(qVis);
    eq('DelayMessages', a.DelayMessages, '1');
    eq('ActiveMessages', a.ActiveMessages, '0');
    await rejects('a delayed message is not peeked', client.peekMessage(qVis), mnsError('MessageNotExist', 404));
    // A long poll is woken when the delay ends.
    const r = await timed(() => client.receiveMessage(qVis, 10));
    between('the receive returned about 1 s after the send (ms)', r.hi - s.lo, 900, 4000);
    checkMessage('delayed message', r.r.body, { id: s.r.body.MessageId, body: 'later', priority: 8, sentLo: s.lo, sentHi: s.hi, received: true, dequeueCount: 1, vt: 30, recvLo: r.lo, recvHi: r.hi });
    await client.deleteMessage(qVis, r.r.body.ReceiptHandle);
    // The queue's DelaySeconds applies to messages without their own.
    eq('Set DelaySeconds 2', (await client.setQueueAttributes(qVis, { DelaySeconds: 2 })).code, 204);
    await client.sendMessage(qVis, { MessageBody: 'queue delay' });
    await client.sendMessage(qVis, { MessageBody: 'own delay 0', DelaySeconds: 0 });
    a = await attrs(qVis);
    eq('DelaySeconds attribute', a.DelaySeconds, '2');
    eq('DelayMessages (the queue delay applied)', a.DelayMessages, '1');
    eq('ActiveMessages (DelaySeconds 0 of the message wins)', a.ActiveMessages, '1');
    const p = await client.peekMessage(qVis);
    eq('the active one', p.body.MessageBody, 'own delay 0');
    await client.deleteQueue(qVis);
  });

  await step('Long polling', async () => {
    let t = await timed(() => rejects('receive on an empty queue', client.receiveMessage(qPoll), mnsError('MessageNotExist', 404)));
    between('answered without waiting (ms)', t.hi - t.lo, 0, 1500);
    t = await timed(() => rejects('receive with waitseconds=2', client.receiveMessage(qPoll, 2), mnsError('MessageNotExist', 404)));
    between('answered after the wait (ms)', t.hi - t.lo, 1950, 5000);
    t = await timed(() => rejects('batch receive without wait', client.batchReceiveMessage(qPoll, 4), mnsError('MessageNotExist', 404)));
    between('answered without waiting (ms)', t.hi - t.lo, 0, 1500);
    t = await timed(() => rejects('batch receive with waitseconds=1', client.batchReceiveMessage(qPoll, 4, 1), mnsError('MessageNotExist', 404)));
    between('answered after the wait (ms)', t.hi - t.lo, 950, 4000);
    t = await timed(() => rejects('peek on an empty queue', client.peekMessage(qPoll), mnsError('MessageNotExist', 404)));
    t = await timed(() => rejects('batch peek on an empty queue', client.batchPeekMessage(qPoll, 16), mnsError('MessageNotExist', 404)));

    // A waiting receive is woken by a send from another client.
    let pending = timed(() => client.receiveMessage(qPoll, 20));
    await sleep(300);
    let s = await timed(() => client2.sendMessage(qPoll, { MessageBody: 'wake up', Priority: 2 }));
    let r = await pending;
    between('the single receive returned soon after the send (ms)', r.hi - s.hi, -50, 1500);
    ok('and well before its 20 s wait', r.hi - r.lo < 10000, r.hi - r.lo);
    checkMessage('woken receive', r.r.body, { id: s.r.body.MessageId, body: 'wake up', priority: 2, sentLo: s.lo, sentHi: s.hi, received: true, dequeueCount: 1, vt: 30, recvLo: s.lo, recvHi: r.hi });
    await client.deleteMessage(qPoll, r.r.body.ReceiptHandle);

    pending = timed(() => client.batchReceiveMessage(qPoll, 16, 20));
    await sleep(300);
    s = await timed(() => client2.batchSendMessage(qPoll, [{ MessageBody: 'b1' }, { MessageBody: 'b2' }]));
    r = await pending;
    between('the batch receive returned soon after the send (ms)', r.hi - s.hi, -50, 1500);
    ok('it returned 1 or 2 messages', r.r.body.length >= 1 && r.r.body.length <= 2, r.r.body);
    await client.batchDeleteMessage(qPoll, r.r.body.map(m => m.ReceiptHandle));

    // The queue's PollingWaitSeconds applies to receives without waitseconds.
    await client.setQueueAttributes(qPoll, { PollingWaitSeconds: 1 });
    const left = await client.batchReceiveMessage(qPoll, 16).catch(() => ({ body: [] }));
    if (left.body.length) await client.batchDeleteMessage(qPoll, left.body.map(m => m.ReceiptHandle));
    t = await timed(() => rejects('receive without waitseconds on a queue with PollingWaitSeconds 1', client.receiveMessage(qPoll), mnsError('MessageNotExist', 404)));
    between('waited PollingWaitSeconds (ms)', t.hi - t.lo, 950, 4000);
    await rejects('waitseconds=31', client.receiveMessage(qPoll, 31), mnsError('InvalidArgument', 400));
  });

  await step('Authentication', async () => {
    const bad = new MNS(accountId, { accessKeyId: keyId, accessKeySecret: secret + 'x', endpoint });
    await rejects('a wrong secret', bad.getQueueAttributes(qMain), mnsError('SignatureDoesNotMatch', 403));
    const unknown = new MNS(accountId, { accessKeyId: 'nobody', accessKeySecret: secret, endpoint });
    await rejects('an unknown access key id', unknown.listQueue('', 10, P), mnsError('InvalidAccessKeyId', 403));
  });

  // Every topic operation @alicloud/mns 1.2.0 implements (createTopic,
  // getTopicAttributes, setTopicAttributes, listTopic, publishMessage); its
  // subscription methods are empty stubs, so Subscribe, the subscription
  // attributes and their list go through the SDK's own signed put()/get().
  await step('Topics', async () => {
    const t = P + 'topic';
    const sec = () => Math.floor(Date.now() / 1000);
    const lo = sec();
    let r = await client.createTopic(t, { MaximumMessageSize: 2048, LoggingEnabled: 'True' });
    eq('createTopic status', r.code, 201);
    eq('createTopic Location', r.headers.location, `${endpoint}/topics/${t}`);
    eq('createTopic no body', r.body, undefined);
    r = await client.createTopic(t, { MaximumMessageSize: 2048, LoggingEnabled: 'True' });
    eq('createTopic identical: status', r.code, 204);
    eq('createTopic identical: Location', r.headers.location, `${endpoint}/topics/${t}`);
    await rejects('createTopic with other attributes', client.createTopic(t, { MaximumMessageSize: 4096 }), mnsError('TopicAlreadyExist', 409));
    await rejects('createTopic with a bad name', client.createTopic('bad_name'), mnsError('TopicNameInvalid', 400));
    r = await client.getTopicAttributes(t);
    eq('getTopicAttributes status', r.code, 200);
    keys('the seven topic attributes', r.body, ['TopicName', 'CreateTime', 'LastModifyTime', 'MaximumMessageSize',
      'MessageRetentionPeriod', 'MessageCount', 'LoggingEnabled']);
    eq('TopicName', r.body.TopicName, t);
    eq('MaximumMessageSize', r.body.MaximumMessageSize, '2048');
    eq('MessageRetentionPeriod', r.body.MessageRetentionPeriod, '86400');
    eq('MessageCount', r.body.MessageCount, '0');
    eq('LoggingEnabled', r.body.LoggingEnabled, 'True');
    between('CreateTime (s)', Number(r.body.CreateTime), lo, sec());
    eq('LastModifyTime', r.body.LastModifyTime, r.body.CreateTime);
    r = await client.setTopicAttributes(t, { MaximumMessageSize: 65536, LoggingEnabled: 'False' });
    eq('setTopicAttributes status', r.code, 204);
    r = await client.getTopicAttributes(t);
    eq('MaximumMessageSize after set', r.body.MaximumMessageSize, '65536');
    eq('LoggingEnabled after set', r.body.LoggingEnabled, 'False');
    await rejects('setTopicAttributes out of range', client.setTopicAttributes(t, { MaximumMessageSize: 100 }), mnsError('InvalidArgument', 400));
    await rejects('getTopicAttributes of a missing topic', client.getTopicAttributes(P + 'no-topic'), mnsError('TopicNotExist', 404));
    r = await client.listTopic('', 1000, P + 'topic');
    eq('listTopic status', r.code, 200);
    eq('listTopic: the topic with its TopicURL', r.body, [{ TopicURL: `${endpoint}/topics/${t}` }]);

    // One queue subscription per NotifyContentFormat (SDK's signed put()).
    const formats = ['XML', 'JSON', 'SIMPLIFIED'];
    for (const f of formats) {
      const q = P + 'sub-' + f.toLowerCase();
      await client.createQueue(q);
      const body = `<?xml version="1.0" encoding="UTF-8"?><Subscription xmlns="http://mns.aliyuncs.com/doc/v1/">` +
        `<Endpoint>acs:mns:cn-hangzhou:${accountId}:queues/${q}</Endpoint><NotifyContentFormat>${f}</NotifyContentFormat></Subscription>`;
      r = await client.put(`/topics/${t}/subscriptions/to-${f.toLowerCase()}`, 'Subscription', body, ['location']);
      eq(`subscribe ${f}: status`, r.code, 201);
      eq(`subscribe ${f}: Location`, r.headers.location, `${endpoint}/topics/${t}/subscriptions/to-${f.toLowerCase()}`);
    }
    // HTTP endpoints are pushed to (step 'HTTP push'), within --push-allow
    // only (default loopback).
    const outside = `<Subscription><Endpoint>http://10.1.2.3:9/ep</Endpoint></Subscription>`;
    await rejects('subscribe an HTTP endpoint outside the push allow list', client.put(`/topics/${t}/subscriptions/http`, 'Subscription', outside), mnsError('EndpointInvalid', 400));
    await rejects('the refused subscription does not exist', client.get(`/topics/${t}/subscriptions/http`, 'Subscription'), mnsError('SubscriptionNotExist', 404));
    r = await client.get(`/topics/${t}/subscriptions/to-json`, 'Subscription');
    eq('getSubscriptionAttributes status', r.code, 200);
    keys('the subscription attributes', r.body, ['SubscriptionName', 'Subscriber', 'TopicOwner', 'TopicName', 'Endpoint',
      'NotifyStrategy', 'NotifyContentFormat', 'CreateTime', 'LastModifyTime']);
    eq('SubscriptionName', r.body.SubscriptionName, 'to-json');
    eq('TopicName', r.body.TopicName, t);
    eq('Endpoint', r.body.Endpoint, `acs:mns:cn-hangzhou:${accountId}:queues/${P}sub-json`);
    eq('NotifyStrategy', r.body.NotifyStrategy, 'BACKOFF_RETRY');
    eq('NotifyContentFormat', r.body.NotifyContentFormat, 'JSON');
    eq('Subscriber = TopicOwner', r.body.Subscriber, r.body.TopicOwner);
    r = await client.get(`/topics/${t}/subscriptions`, 'Subscriptions', { headers: { 'x-mns-ret-number': 2 } });
    keys('first page of 2 subscriptions', r.body, ['Subscription', 'NextMarker']);
    eq('first page', r.body.Subscription, [
      { SubscriptionURL: `${endpoint}/topics/${t}/subscriptions/to-json` },
      { SubscriptionURL: `${endpoint}/topics/${t}/subscriptions/to-simplified` }]);

    // publishMessage: the README flow, MessageAttributes included, and
    // UserProperties: the SDK has no API of its own for them, but sends any
    // params key as an element (its value verbatim when a string), which
    // is how a caller sets them (spec Q§3.5, §2.11). They are copied to
    // every queue delivery (spec §3.7).
    const text = 'hello topic';
    const props = [{ Name: 'k1', Value: 'v 1', Type: 'STRING' }, { Name: 'n', Value: '42', Type: 'NUMBER' }];
    r = await client.publishMessage(t, {
      MessageBody: text, MessageTag: 'tagA', MessageAttributes: { DirectSMS: '{"a":1}' },
      UserProperties: props.map(p => `<PropertyValue><Name>${p.Name}</Name><Value>${p.Value}</Value><Type>${p.Type}</Type></PropertyValue>`).join(''),
    });
    eq('publishMessage status', r.code, 201);
    keys('publishMessage answer', r.body, ['MessageId', 'MessageBodyMD5']);
    match('MessageId', r.body.MessageId, /^[0-9A-F]{32}$/);
    eq('MessageBodyMD5', r.body.MessageBodyMD5, md5Upper(text));
    const id = r.body.MessageId;
    await rejects('publishMessage to a missing topic', client.publishMessage(P + 'no-topic', { MessageBody: 'x' }), mnsError('TopicNotExist', 404));
    await rejects('publishMessage with a 17-character tag', client.publishMessage(t, { MessageBody: 'x', MessageTag: 'x'.repeat(17) }), mnsError('InvalidArgument', 400));
    // A long poll: in a cluster a queue on another shard than the topic's
    // gets its delivery relayed after the publish's answer (MNS too fans
    // out after answering, topic spec §2.11).
    for (const f of formats) {
      const q = P + 'sub-' + f.toLowerCase();
      const m = (await client.receiveMessage(q, 5)).body;
      ok(`${f}: a new message`, m.MessageId !== id, m);
      eq(`${f}: the publish's UserProperties, copied`, m.UserProperties, [{ PropertyValue: props }]);
      eq(`${f}: its MD5 is of the delivered body`, m.MessageBodyMD5, md5Upper(m.MessageBody));
      if (f === 'SIMPLIFIED') {
        eq('SIMPLIFIED body', m.MessageBody, text);
      } else if (f === 'JSON') {
        const n = JSON.parse(m.MessageBody);
        keys('JSON notification keys', n, ['TopicOwner', 'TopicName', 'Subscriber', 'SubscriptionName', 'MessageId',
          'Message', 'MessageMD5', 'MessageTag', 'PublishTime']);
        eq('JSON TopicName', n.TopicName, t);
        eq('JSON SubscriptionName', n.SubscriptionName, 'to-json');
        eq('JSON MessageId', n.MessageId, id);
        eq('JSON Message', n.Message, text);
        eq('JSON MessageMD5', n.MessageMD5, md5Upper(text));
        eq('JSON MessageTag', n.MessageTag, 'tagA');
        between('JSON PublishTime (ms)', n.PublishTime, lo * 1000, Date.now());
      } else {
        match('XML notification', m.MessageBody, new RegExp('^<\\?xml version="1.0" encoding="utf-8"\\?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/">' +
          `<TopicOwner>[^<]+</TopicOwner><TopicName>${t}</TopicName><Subscriber>[^<]+</Subscriber><SubscriptionName>to-xml</SubscriptionName>` +
          `<MessageId>${id}</MessageId><Message>${text}</Message><MessageMD5>${md5Upper(text)}</MessageMD5>` +
          '<MessageTag>tagA</MessageTag><PublishTime>[0-9]{13}</PublishTime></Notification>$'));
      }
      eq(`${f}: delete the delivery`, (await client.deleteMessage(q, m.ReceiptHandle)).code, 204);
      // One delivery per subscription. In a cluster a relayed delivery is
      // at least once (engine/topic_relay.go invariant 1): a copy, the
      // same notification, may be there too.
      if (!c.CLUSTER) {
        await rejects(`${f}: nothing more in ${q} (one delivery)`, client.peekMessage(q), mnsError('MessageNotExist', 404));
      } else {
        const more = await client.batchPeekMessage(q, 16).then(x => x.body, e => (mnsError('MessageNotExist', 404)(e), []));
        for (const d of more) eq(`${f}: a further message in ${q} is a relayed copy of the same notification`, d.MessageBody, m.MessageBody);
      }
    }
    r = await client.getTopicAttributes(t);
    eq('MessageCount after one publish', r.body.MessageCount, '1');

    // Unsubscribe and DeleteTopic (no SDK method: signed delete()).
    r = await client.delete(`/topics/${t}/subscriptions/to-xml`, 'Subscription', '');
    eq('unsubscribe status', r.code, 204);
    await rejects('attributes of a removed subscription', client.get(`/topics/${t}/subscriptions/to-xml`, 'Subscription'), mnsError('SubscriptionNotExist', 404));
    r = await client.delete(`/topics/${t}`, 'Topic', '');
    eq('deleteTopic status', r.code, 204);
    await rejects('attributes of a deleted topic', client.getTopicAttributes(t), mnsError('TopicNotExist', 404));
    for (const f of formats) await client.deleteQueue(P + 'sub-' + f.toLowerCase());
  });

  // HTTP push (topic spec §3.4-§3.6) to receivers in this process; the
  // SDK's subscribe is an empty stub, so subscriptions go through its
  // signed put(), everything else through its own calls.
  await step('HTTP push', async () => {
    const topics = [P + 'push', P + 'push-retry'];
    for (const n of topics) eq(`createTopic ${n}`, (await client.createTopic(n)).code, 201);
    const wire = 'héllo "push" &lt;&amp;&gt; \u{1F600}'; // the SDK does not escape
    const subURL = (t, n) => `/topics/${t}/subscriptions/${n}`;
    const subscribe = async (t, n, ep, strategy, format) => {
      const x = `<?xml version="1.0" encoding="UTF-8"?><Subscription xmlns="http://mns.aliyuncs.com/doc/v1/"><Endpoint>${ep.replace(/&/g, '&amp;')}</Endpoint>` +
        (strategy ? `<NotifyStrategy>${strategy}</NotifyStrategy>` : '') +
        (format ? `<NotifyContentFormat>${format}</NotifyContentFormat>` : '') + '</Subscription>';
      const r = await client.put(subURL(t, n), 'Subscription', x, ['location']);
      eq(`subscribe ${n} (${ep}): status`, r.code, 201);
      eq(`subscribe ${n}: Location`, r.headers.location, `${endpoint}${subURL(t, n)}`);
    };
    await rejects('subscribe http://10.1.2.3:9/ep (outside --push-allow)', subscribe(topics[0], 'outside', 'http://10.1.2.3:9/ep'), mnsError('EndpointInvalid', 400));
    await rejects('subscribe http://example.com/ep (a host name not allowed)', subscribe(topics[0], 'outside', 'http://example.com/ep'), mnsError('EndpointInvalid', 400));
    await push.scenario({
      endpoint,
      topics,
      text: 'héllo "push" <&> \u{1F600}',
      subscribe,
      attrs: async (t, n) => {
        const r = await client.get(subURL(t, n), 'Subscription');
        eq(`getSubscriptionAttributes ${n}: status`, r.code, 200);
        return r.body;
      },
      publish: async (t, tag) => {
        const params = { MessageBody: wire };
        if (tag) params.MessageTag = tag;
        const r = await client.publishMessage(t, params);
        eq('publishMessage status', r.code, 201);
        return { id: r.body.MessageId, md5: r.body.MessageBodyMD5 };
      },
      unsubscribe: async (t, n) => eq(`unsubscribe ${n}`, (await client.delete(subURL(t, n), 'Subscription', '')).code, 204),
    });
    for (const n of topics) eq(`deleteTopic ${n}`, (await client.delete(`/topics/${n}`, 'Topic', '')).code, 204);
  });

  // The dead-letter extension of a self-hosted server (topic spec §3.8):
  // no SDK sends it, so through the SDK's signed put().
  await step('Subscription dead-letter queue', async () => {
    const t = P + 'dlq-topic';
    const src = P + 'dlq-src';
    const dlq = P + 'dlq';
    eq('createTopic', (await client.createTopic(t)).code, 201);
    for (const q of [src, dlq]) eq(`createQueue ${q}`, (await client.createQueue(q)).code, 201);
    const ep = `acs:mns:cn-hangzhou:${accountId}:queues/${src}`;
    const sub = n => `/topics/${t}/subscriptions/${n}`;
    const attrsOf = async n => (await client.get(sub(n), 'Subscription')).body;
    const nine = ['SubscriptionName', 'Subscriber', 'TopicOwner', 'TopicName', 'Endpoint', 'NotifyStrategy', 'NotifyContentFormat', 'CreateTime', 'LastModifyTime'];
    const set = (n, inner) => client.put(sub(n) + '?metaoverride=true', 'Subscription', `<Subscription>${inner}</Subscription>`);
    let r = await client.put(sub('s'), 'Subscription', `<Subscription><Endpoint>${ep}</Endpoint></Subscription>`, ['location']);
    eq('subscribe without a dead-letter queue', r.code, 201);
    keys('no DeadLetterTargetQueue when unset', await attrsOf('s'), nine);
    r = await set('s', `<DeadLetterTargetQueue>${dlq}</DeadLetterTargetQueue>`);
    eq('set DeadLetterTargetQueue: status', r.code, 204);
    let a = await attrsOf('s');
    keys('GetSubscriptionAttributes with a dead-letter queue', a, [...nine, 'DeadLetterTargetQueue']);
    eq('DeadLetterTargetQueue echoed flat', a.DeadLetterTargetQueue, dlq);
    eq('Endpoint kept', a.Endpoint, ep);
    await rejects('set an unknown DeadLetterTargetQueue', set('s', `<DeadLetterTargetQueue>${P}no-queue</DeadLetterTargetQueue>`), mnsError('InvalidArgument', 400));
    await rejects('set the subscription\'s own queue', set('s', `<DeadLetterTargetQueue>${src}</DeadLetterTargetQueue>`), mnsError('InvalidArgument', 400));
    eq('refused sets changed nothing', (await attrsOf('s')).DeadLetterTargetQueue, dlq);
    eq('set an empty DeadLetterTargetQueue (off)', (await set('s', '<DeadLetterTargetQueue></DeadLetterTargetQueue>')).code, 204);
    keys('no DeadLetterTargetQueue after turning it off', await attrsOf('s'), nine);
    const policy = `<Subscription><Endpoint>${ep}</Endpoint><DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>${dlq}</DeadLetterTargetQueue></DlqPolicy></Subscription>`;
    r = await client.put(sub('p'), 'Subscription', policy, ['location']);
    eq('subscribe with a DlqPolicy: status', r.code, 201);
    a = await attrsOf('p');
    keys('the DlqPolicy is echoed', a, [...nine, 'DeadLetterTargetQueue']);
    eq('flat, as DeadLetterTargetQueue', a.DeadLetterTargetQueue, dlq);
    eq('subscribe again, identical', (await client.put(sub('p'), 'Subscription', policy)).code, 204);
    await rejects('subscribe with an unknown DeadLetterTargetQueue', client.put(sub('u'), 'Subscription',
      `<Subscription><Endpoint>${ep}</Endpoint><DeadLetterTargetQueue>${P}no-queue</DeadLetterTargetQueue></Subscription>`), mnsError('InvalidArgument', 400));
    await rejects('subscribe with its own queue as DlqPolicy target', client.put(sub('u'), 'Subscription',
      `<Subscription><Endpoint>${ep}</Endpoint><DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>${src}</DeadLetterTargetQueue></DlqPolicy></Subscription>`), mnsError('InvalidArgument', 400));
    await rejects('the refused subscription does not exist', client.get(sub('u'), 'Subscription'), mnsError('SubscriptionNotExist', 404));
    eq('deleteTopic', (await client.delete(`/topics/${t}`, 'Topic', '')).code, 204);
    for (const q of [src, dlq]) eq(`deleteQueue ${q}`, (await client.deleteQueue(q)).code, 204);
  });

  await step('DeleteQueue', async () => {
    for (const q of [qMain, qPrio, qPoll, ...listNames]) {
      const r = await client.deleteQueue(q);
      eq(`status for ${q}`, r.code, 204);
      eq('no body', r.body, undefined);
    }
    await rejects('delete a deleted queue', client.deleteQueue(qMain), mnsError('QueueNotExist', 404));
    await rejects('attributes of a deleted queue', client.getQueueAttributes(qMain), mnsError('QueueNotExist', 404));
    await rejects('receive from a deleted queue', client.receiveMessage(qMain), mnsError('QueueNotExist', 404));
    const r = await client.listQueue('', 1000, P);
    eq('no queue of this script is left', r.body, undefined);
  });

  c.done('@alicloud/mns 1.2.0');
})().catch(e => c.fail('unexpected exception', [c.show(e)]));
