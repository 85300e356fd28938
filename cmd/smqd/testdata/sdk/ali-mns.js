// ali-mns 2.6.8 against a running smqd (spec §9.3). The SDK has no
// endpoint option; the script reaches smqd in one of two ways, chosen by
// SMQD_ALIMNS_MODE:
//
//   proxy  HTTP_PROXY=http://127.0.0.1:PORT: the SDK's HTTP library sends
//          absolute-form request targets (GET http://<acct>.mns.cn-hangzhou.aliyuncs.com/queues/... HTTP/1.1)
//          with that Host, which smqd must route and sign (spec §1.1)
//   url    the URLs computed by the constructors are overwritten with the
//          local endpoint (MNS._url, MQ._urlAttr and MQ._url)
//
// Run by cmd/smqd/sdk_test.go, which starts the daemon and passes
// SMQD_ENDPOINT, SMQD_ACCESS_KEY_ID, SMQD_ACCESS_KEY_SECRET and the mode
// (and HTTP_PROXY in proxy mode).
//
// ali-mns base64-encodes bodies on send and decodes them on receive (spec
// §7.6): MessageBodyMD5 is the MD5 of the base64 text. It resolves with the
// parsed XML (xml2js, explicitArray: false), or the status code when there
// is no body, and rejects with the parsed error document.
'use strict';

const AliMNS = require('ali-mns');
const c = require('./check');
const push = require('./push');
const { eq, ok, match, between, keys, rejects, step, checkMessage, checkQueueAttrs, md5Upper, sleep } = c;

const endpoint = c.env('SMQD_ENDPOINT');
const keyId = c.env('SMQD_ACCESS_KEY_ID');
const secret = c.env('SMQD_ACCESS_KEY_SECRET');
const mode = c.env('SMQD_ALIMNS_MODE');
const accountId = '1234567890';
const region = new AliMNS.Region(AliMNS.City.Hangzhou);

if (mode !== 'proxy' && mode !== 'url') c.fail('SMQD_ALIMNS_MODE must be proxy or url', [mode]);
// The Host smqd sees, which it uses in QueueURL and HostId.
const host = mode === 'proxy' ? `${accountId}.mns.cn-hangzhou.aliyuncs.com` : new URL(endpoint).host;

function account(id, key) {
  const a = new AliMNS.Account(accountId, id, key);
  a.setGA(false); // no Google Analytics call (spec §9.3)
  return a;
}
const acct = account(keyId, secret);

function newMNS(a) {
  const m = new AliMNS.MNS(a || acct, region);
  if (mode === 'url') m._url = `${endpoint}/queues/`;
  return m;
}

function newMQ(name, batch, a) {
  const q = batch ? new AliMNS.MQBatch(name, a || acct, region) : new AliMNS.MQ(name, a || acct, region);
  if (mode === 'url') {
    q._urlAttr = `${endpoint}/queues/${name}`;
    q._url = q._urlAttr + '/messages';
  }
  return q;
}

// rejected returns a check of a rejection: the parsed <Error> document
// with exactly Code, Message, RequestId and HostId.
function rejected(code) {
  return e => {
    ok('rejected with an Error document', e && typeof e === 'object' && e.Error, e);
    keys('Error', e.Error, ['Code', 'Message', 'RequestId', 'HostId']);
    eq('Error.Code', e.Error.Code, code);
    ok('Error.Message is not empty', typeof e.Error.Message === 'string' && e.Error.Message.length > 0, e.Error);
    match('Error.RequestId', e.Error.RequestId, c.REQUEST_ID);
    eq('Error.HostId', e.Error.HostId, `http://${host}`);
    eq('Error namespace (no trailing slash)', e.Error.$ && e.Error.$.xmlns, 'http://mns.aliyuncs.com/doc/v1');
  };
}

async function timed(f) {
  const lo = Date.now();
  const r = await f();
  return { r, lo, hi: Date.now() };
}

function newMNSTopic() {
  const mt = new AliMNS.MNSTopic(acct, region);
  if (mode === 'url') mt._urlTopic = `${endpoint}/topics/`;
  return mt;
}

function newTopic(n) {
  const t = new AliMNS.Topic(n, acct, region);
  if (mode === 'url') {
    t._urlAttr = `${endpoint}/topics/${n}`;
    t._urlSubscription = t._urlAttr + '/subscriptions/';
    t._urlPublish = t._urlAttr + '/messages';
  }
  return t;
}

function newSub(n, t) {
  const s = new AliMNS.Subscription(n, t);
  if (mode === 'url') s._urlAttr = `${endpoint}/topics/${t.getName()}/subscriptions/${n}`;
  return s;
}

const b64 = s => Buffer.from(s, 'utf8').toString('base64');
const list = x => (x === undefined ? [] : Array.isArray(x) ? x : [x]);

const P = `alimns-${mode}-`; // every queue of this script
const qName = P + 'main';
const listNames = [P + 'list-a', P + 'list-b', P + 'list-c'];

(async () => {
  if (mode === 'proxy') {
    eq('HTTP_PROXY points at smqd', process.env.HTTP_PROXY, endpoint);
  } else {
    ok('no proxy in the environment', !process.env.HTTP_PROXY && !process.env.http_proxy, process.env.HTTP_PROXY);
  }
  const tStart = Date.now();
  const mns = newMNS();
  const mq = newMQ(qName, false);
  const batch = newMQ(qName, true);

  await step('createP (CreateQueue)', async () => {
    eq('status of a new queue (<Queue/> body)', await mns.createP(qName), 201);
    eq('status with identical attributes', await mns.createP(qName), 204);
    await rejects('different attributes', mns.createP(qName, { VisibilityTimeout: 45 }), rejected('QueueAlreadyExist'));
    await rejects('a bad name', mns.createP('bad_name'), rejected('InvalidQueueName'));
    await rejects('DelaySeconds 604801', mns.createP(P + 'x', { DelaySeconds: 604801 }), rejected('InvalidArgument'));
  });

  await step('getAttrsP / setAttrsP (Get/SetQueueAttributes)', async () => {
    let r = await mq.getAttrsP();
    keys('answer', r, ['Queue']);
    checkQueueAttrs('Queue', r.Queue, {
      QueueName: qName, DelaySeconds: 0, MaximumMessageSize: 65536, MessageRetentionPeriod: 345600,
      VisibilityTimeout: 30, PollingWaitSeconds: 0, ActiveMessages: 0, InactiveMessages: 0, DelayMessages: 0,
      LoggingEnabled: 'False',
    }, tStart, Date.now());
    eq('Queue namespace', r.Queue.$ && r.Queue.$.xmlns, 'http://mns.aliyuncs.com/doc/v1');
    eq('setAttrsP status', await mq.setAttrsP({ VisibilityTimeout: 45, LoggingEnabled: true }), 204);
    r = await mq.getAttrsP();
    eq('VisibilityTimeout changed', r.Queue.VisibilityTimeout, '45');
    eq('LoggingEnabled changed', r.Queue.LoggingEnabled, 'True');
    eq('MaximumMessageSize kept', r.Queue.MaximumMessageSize, '65536');
    await rejects('setAttrsP VisibilityTimeout 43201', mq.setAttrsP({ VisibilityTimeout: 43201 }), rejected('InvalidArgument'));
    await rejects('getAttrsP of a missing queue', newMQ(P + 'missing').getAttrsP(), rejected('QueueNotExist'));
  });

  await step('listP (ListQueue)', async () => {
    for (const n of listNames) eq(`create ${n}`, await mns.createP(n), 201);
    // QueueURL has the scheme the request came over (the endpoint's, or
    // http through the proxy).
    const scheme = mode === 'proxy' ? 'http:' : new URL(endpoint).protocol;
    const url = n => `${scheme}//${host}/queues/${n}`;
    let r = await mns.listP(P + 'list-', 2);
    keys('answer', r, ['Queues']);
    keys('first page of 2', r.Queues, ['Queue', 'NextMarker']);
    eq('first page', list(r.Queues.Queue), listNames.slice(0, 2).map(n => ({ QueueURL: url(n) })));
    ok('NextMarker is not empty', typeof r.Queues.NextMarker === 'string' && r.Queues.NextMarker !== '', r.Queues);
    r = await mns.listP(P + 'list-', 2, r.Queues.NextMarker);
    keys('last page (no NextMarker)', r.Queues, ['Queue']);
    eq('last page', list(r.Queues.Queue), [{ QueueURL: url(listNames[2]) }]);
    r = await mns.listP(P + 'list-');
    eq('without a page size: every queue with the prefix', list(r.Queues.Queue).map(q => q.QueueURL), listNames.map(url));
    r = await mns.listP(P + 'none-');
    keys('an empty list', r.Queues, []);
    await rejects('page size 1001', mns.listP(P, 1001), rejected('InvalidArgument'));
  });

  const sent = {};
  await step('sendP (SendMessage, base64 bodies)', async () => {
    for (const [text, prio] of [['héllo + world <&>', 3], ['plain', undefined]]) {
      const { r, lo, hi } = await timed(() => mq.sendP(text, prio));
      keys('answer', r, ['Message']);
      keys('Message', r.Message, ['MessageId', 'MessageBodyMD5']);
      match('MessageId', r.Message.MessageId, c.MESSAGE_ID);
      eq('MessageBodyMD5 = MD5 of the base64 text sent', r.Message.MessageBodyMD5, md5Upper(b64(text)));
      sent[text] = { id: r.Message.MessageId, body: text, wireBody: b64(text), priority: prio || 8, sentLo: lo, sentHi: hi };
    }
    await rejects('Priority 0', mq.sendP('x', 0), rejected('InvalidArgument'));
    await rejects('send to a missing queue', newMQ(P + 'missing').sendP('x'), rejected('QueueNotExist'));
  });

  await step('peekP (PeekMessage)', async () => {
    const r = await mq.peekP();
    keys('answer', r, ['Message']);
    eq('the priority 3 message comes first', r.Message.MessageBody, 'héllo + world <&>');
    checkMessage('peeked message', r.Message, { ...sent['héllo + world <&>'], received: false, dequeueCount: 0 });
  });

  let handle;
  await step('recvP (ReceiveMessage)', async () => {
    const { r, lo, hi } = await timed(() => mq.recvP());
    keys('answer', r, ['Message']);
    checkMessage('received message', r.Message, { ...sent['héllo + world <&>'], received: true, dequeueCount: 1, vt: 45, recvLo: lo, recvHi: hi });
    handle = r.Message.ReceiptHandle;
  });

  await step('reserveP (ChangeMessageVisibility)', async () => {
    const { r, lo, hi } = await timed(() => mq.reserveP(handle, 60));
    keys('answer', r, ['ChangeVisibility']);
    keys('ChangeVisibility', r.ChangeVisibility, ['ReceiptHandle', 'NextVisibleTime']);
    const h2 = r.ChangeVisibility.ReceiptHandle;
    match('new ReceiptHandle', h2, c.RECEIPT_HANDLE);
    ok('the new handle differs from the old one', h2 !== handle, r);
    between('NextVisibleTime = now + 60 s', r.ChangeVisibility.NextVisibleTime, lo + 60000 - 5, hi + 60000 + 5);
    await rejects('deleteP with the old handle', mq.deleteP(handle), rejected('MessageNotExist'));
    await rejects('reserveP with the old handle', mq.reserveP(handle, 10), rejected('MessageNotExist'));
    await rejects('reserveP with a garbage handle', mq.reserveP('garbage', 10), rejected('ReceiptHandleError'));
    await rejects('reserveP 0 seconds', mq.reserveP(h2, 0), rejected('InvalidArgument'));
    eq('deleteP with the new handle', await mq.deleteP(h2), 204);
    await rejects('deleteP again', mq.deleteP(h2), rejected('MessageNotExist'));
  });

  await step('visibility timeout expiry', async () => {
    const first = await timed(() => mq.recvP());
    const want = sent.plain;
    checkMessage('first receive', first.r.Message, { ...want, received: true, dequeueCount: 1, vt: 45, recvLo: first.lo, recvHi: first.hi });
    const ch = await mq.reserveP(first.r.Message.ReceiptHandle, 1);
    await sleep(Math.max(0, Number(ch.ChangeVisibility.NextVisibleTime) - Date.now()) + 20);
    const second = await timed(() => mq.recvP(5));
    checkMessage('second receive', second.r.Message, {
      ...want, received: true, dequeueCount: 2, vt: 45, recvLo: second.lo, recvHi: second.hi,
      firstDequeueTime: first.r.Message.FirstDequeueTime,
    });
    await rejects('the expired handle', mq.deleteP(ch.ChangeVisibility.ReceiptHandle), rejected('MessageNotExist'));
    eq('deleteP with the new handle', await mq.deleteP(second.r.Message.ReceiptHandle), 204);
  });

  const exp = {};
  await step('MQBatch.sendP (BatchSendMessage)', async () => {
    const msgs = [new AliMNS.Msg('low', 16), new AliMNS.Msg('high', 1), new AliMNS.Msg('mid')];
    const { r, lo, hi } = await timed(() => batch.sendP(msgs));
    keys('answer', r, ['Messages']);
    const entries = list(r.Messages.Message);
    eq('one entry per message', entries.length, 3);
    entries.forEach((e, i) => {
      keys(`entry ${i}`, e, ['MessageId', 'MessageBodyMD5']);
      match(`entry ${i} MessageId`, e.MessageId, c.MESSAGE_ID);
      const text = msgs[i].getMsg();
      eq(`entry ${i} MessageBodyMD5 (request order, base64 text)`, e.MessageBodyMD5, md5Upper(b64(text)));
      exp[text] = { id: e.MessageId, body: text, wireBody: b64(text), priority: msgs[i].getPriority(), sentLo: lo, sentHi: hi };
    });
    const many = Array.from({ length: 17 }, (_, i) => new AliMNS.Msg('m' + i));
    await rejects('17 messages', batch.sendP(many), rejected('InvalidArgument'));
  });

  await step('MQBatch.peekP (BatchPeekMessage)', async () => {
    const r = await batch.peekP(16);
    const ms = list(r.Messages.Message);
    eq('order by priority', ms.map(m => m.MessageBody), ['high', 'mid', 'low']);
    ms.forEach(m => checkMessage(`peeked ${m.MessageBody}`, m, { ...exp[m.MessageBody], received: false, dequeueCount: 0 }));
  });

  let batchRecv;
  await step('MQBatch.recvP (BatchReceiveMessage)', async () => {
    const { r, lo, hi } = await timed(() => batch.recvP(undefined, 16));
    const ms = list(r.Messages.Message);
    eq('order by priority', ms.map(m => m.MessageBody), ['high', 'mid', 'low']);
    ms.forEach(m => checkMessage(`received ${m.MessageBody}`, m, { ...exp[m.MessageBody], received: true, dequeueCount: 1, vt: 45, recvLo: lo, recvHi: hi }));
    batchRecv = ms;
  });

  await step('MQBatch.deleteP (BatchDeleteMessage)', async () => {
    const [high, mid, low] = batchRecv;
    eq('all deleted', await batch.deleteP([high.ReceiptHandle]), 204);
    const e = await rejects('a stale handle, a valid one and garbage', batch.deleteP([high.ReceiptHandle, mid.ReceiptHandle, 'garbage']));
    keys('rejection', e, ['Errors']);
    eq('Errors namespace', e.Errors.$ && e.Errors.$.xmlns, 'http://mns.aliyuncs.com/doc/v1');
    const errs = list(e.Errors.Error);
    eq('one Error per failed handle', errs.length, 2);
    errs.forEach((x, i) => keys(`Error ${i}`, x, ['ErrorCode', 'ErrorMessage', 'ReceiptHandle']));
    eq('stale handle', [errs[0].ErrorCode, errs[0].ReceiptHandle], ['MessageNotExist', high.ReceiptHandle]);
    eq('garbage handle', [errs[1].ErrorCode, errs[1].ReceiptHandle], ['ReceiptHandleError', 'garbage']);
    const a = (await mq.getAttrsP()).Queue;
    eq('the valid handle was deleted: InactiveMessages', a.InactiveMessages, '1');
    eq('single deleteP of the last one', await mq.deleteP(low.ReceiptHandle), 204);
  });

  await step('long polling', async () => {
    let t = await timed(() => rejects('recvP on an empty queue', mq.recvP(), rejected('MessageNotExist')));
    between('answered without waiting (ms)', t.hi - t.lo, 0, 1500);
    t = await timed(() => rejects('recvP(2)', mq.recvP(2), rejected('MessageNotExist')));
    between('answered after the wait (ms)', t.hi - t.lo, 1950, 5000);
    t = await timed(() => rejects('MQBatch.recvP(1, 16)', batch.recvP(1, 16), rejected('MessageNotExist')));
    between('answered after the wait (ms)', t.hi - t.lo, 950, 4000);
    await rejects('peekP on an empty queue', mq.peekP(), rejected('MessageNotExist'));
    await rejects('MQBatch.peekP on an empty queue', batch.peekP(16), rejected('MessageNotExist'));
    const other = newMQ(qName, false);
    const pending = timed(() => batch.recvP(20, 16));
    await sleep(300);
    const s = await timed(() => other.sendP('wake up'));
    const r = await pending;
    between('the batch receive returned soon after the send (ms)', r.hi - s.hi, -50, 1500);
    const ms = list(r.r.Messages.Message);
    eq('one message', ms.length, 1);
    checkMessage('woken receive', ms[0], { id: s.r.Message.MessageId, body: 'wake up', wireBody: b64('wake up'), priority: 8, sentLo: s.lo, sentHi: s.hi, received: true, dequeueCount: 1, vt: 45, recvLo: s.lo, recvHi: r.hi });
    eq('deleteP', await mq.deleteP(ms[0].ReceiptHandle), 204);
  });

  await step('notifyRecv / notifyStopP', async () => {
    const got = [];
    batch.notifyRecv((err, data) => {
      if (err) got.push(err);
      else list(data.Messages.Message).forEach(m => got.push(m.MessageBody));
      return true; // the SDK then deletes what it received
    }, 1, 16);
    await mq.sendP('n1');
    await mq.sendP('n2');
    const deadline = Date.now() + 5000;
    while (got.length < 2 && Date.now() < deadline) await sleep(20);
    eq('notifyRecv delivered both messages', [...got].sort(), ['n1', 'n2']);
    let a;
    while (Date.now() < deadline) {
      a = (await mq.getAttrsP()).Queue;
      if (a.InactiveMessages === '0') break;
      await sleep(20);
    }
    eq('and deleted them: InactiveMessages', a.InactiveMessages, '0');
    eq('ActiveMessages', a.ActiveMessages, '0');
    const stopped = await batch.notifyStopP();
    ok('notifyStopP resolves once the poll loop ended', typeof stopped === 'string', stopped);
  });

  // Every topic call of ali-mns: MNSTopic (listTopicP, createTopicP,
  // deleteTopicP), Topic (getAttrsP, setAttrsP, listP, subscribeP,
  // unsubscribeP, publishP with b64) and Subscription (getAttrsP,
  // setAttrsP); a queue subscription receives the publish as SIMPLIFIED
  // (decoded by recvP, the README flow) and as XML (read through the SDK's
  // own signed sender: recvP would base64-decode the XML document).
  await step('topics (MNSTopic, Topic, Subscription)', async () => {
    const mt = newMNSTopic();
    const scheme = mode === 'proxy' ? 'http:' : new URL(endpoint).protocol;
    const owner = host.split('.')[0].split(':')[0];
    const tn = P + 'topic';
    const names = [tn + '-a', tn + '-b'];
    eq('createTopicP status (<Topic/>)', await mt.createTopicP(tn), 201);
    eq('createTopicP identical', await mt.createTopicP(tn), 204);
    await rejects('createTopicP other attributes', mt.createTopicP(tn, { MaximumMessageSize: 2048 }), rejected('TopicAlreadyExist'));
    await rejects('createTopicP bad name', mt.createTopicP('bad_name'), rejected('TopicNameInvalid'));
    for (const n of names) eq(`createTopicP ${n}`, await mt.createTopicP(n, { MaximumMessageSize: 65536, LoggingEnabled: false }), 201);
    const topic = newTopic(tn);
    let r = await topic.getAttrsP();
    keys('getAttrsP answer', r, ['Topic']);
    eq('Topic namespace', r.Topic.$ && r.Topic.$.xmlns, 'http://mns.aliyuncs.com/doc/v1');
    keys('the seven topic attributes', r.Topic, ['TopicName', 'CreateTime', 'LastModifyTime', 'MaximumMessageSize',
      'MessageRetentionPeriod', 'MessageCount', 'LoggingEnabled']);
    eq('TopicName', r.Topic.TopicName, tn);
    eq('MaximumMessageSize', r.Topic.MaximumMessageSize, '65536');
    eq('MessageRetentionPeriod', r.Topic.MessageRetentionPeriod, '86400');
    eq('MessageCount', r.Topic.MessageCount, '0');
    eq('LoggingEnabled', r.Topic.LoggingEnabled, 'False');
    between('CreateTime (s)', Number(r.Topic.CreateTime), Math.floor(tStart / 1000), Math.ceil(Date.now() / 1000));
    eq('setAttrsP status', await topic.setAttrsP({ LoggingEnabled: true }), 204);
    eq('LoggingEnabled after setAttrsP', (await topic.getAttrsP()).Topic.LoggingEnabled, 'True');
    await rejects('setAttrsP MaximumMessageSize 70000', topic.setAttrsP({ MaximumMessageSize: 70000 }), rejected('InvalidArgument'));
    await rejects('getAttrsP of a missing topic', newTopic(P + 'no-topic').getAttrsP(), rejected('TopicNotExist'));
    const turl = n => `${scheme}//${host}/topics/${n}`;
    r = await mt.listTopicP(tn, 2);
    keys('listTopicP first page', r.Topics, ['Topic', 'NextMarker']);
    eq('first page', list(r.Topics.Topic), [tn, names[0]].map(n => ({ TopicURL: turl(n) })));
    r = await mt.listTopicP(tn, 2, r.Topics.NextMarker);
    keys('listTopicP last page', r.Topics, ['Topic']);
    eq('last page', list(r.Topics.Topic), [{ TopicURL: turl(names[1]) }]);

    const qs = { SIMPLIFIED: P + 'sub-simple', XML: P + 'sub-xml' };
    for (const [f, q] of Object.entries(qs)) {
      eq(`create ${q}`, await mns.createP(q), 201);
      eq(`subscribeP ${f}`, await topic.subscribeP('to-' + f.toLowerCase(), `acs:mns:cn-hangzhou:${accountId}:queues/${q}`,
        AliMNS.Subscription.NotifyStrategy.BACKOFF_RETRY, f), 201);
    }
    // HTTP endpoints are pushed to (step 'HTTP push'), within --push-allow
    // only (default loopback).
    await rejects('subscribeP an HTTP endpoint outside the push allow list', topic.subscribeP('http', 'http://10.1.2.3:9/ep'), rejected('EndpointInvalid'));
    await rejects('the refused subscription does not exist', newSub('http', topic).getAttrsP(), rejected('SubscriptionNotExist'));
    await rejects('subscribeP with a 17-character FilterTag', topic.subscribeP('long', `acs:mns:r:a:queues/${qs.XML}`, null, null, 'x'.repeat(17)), rejected('InvalidArgument'));
    await rejects('subscribeP again, other format', topic.subscribeP('to-xml', `acs:mns:cn-hangzhou:${accountId}:queues/${qs.XML}`, null, 'SIMPLIFIED'), rejected('SubscriptionAlreadyExist'));
    const sub = newSub('to-xml', topic);
    r = await sub.getAttrsP();
    keys('Subscription', r.Subscription, ['SubscriptionName', 'Subscriber', 'TopicOwner', 'TopicName', 'Endpoint',
      'NotifyStrategy', 'NotifyContentFormat', 'CreateTime', 'LastModifyTime']);
    eq('SubscriptionName', r.Subscription.SubscriptionName, 'to-xml');
    eq('Subscriber', r.Subscription.Subscriber, owner);
    eq('TopicOwner', r.Subscription.TopicOwner, owner);
    eq('TopicName', r.Subscription.TopicName, tn);
    eq('Endpoint', r.Subscription.Endpoint, `acs:mns:cn-hangzhou:${accountId}:queues/${qs.XML}`);
    eq('NotifyStrategy', r.Subscription.NotifyStrategy, 'BACKOFF_RETRY');
    eq('NotifyContentFormat', r.Subscription.NotifyContentFormat, 'XML');
    eq('Subscription setAttrsP', await sub.setAttrsP({ NotifyStrategy: 'EXPONENTIAL_DECAY_RETRY' }), 204);
    eq('NotifyStrategy after setAttrsP', (await sub.getAttrsP()).Subscription.NotifyStrategy, 'EXPONENTIAL_DECAY_RETRY');
    await rejects('getAttrsP of a missing subscription', newSub('none', topic).getAttrsP(), rejected('SubscriptionNotExist'));
    r = await topic.listP('to-', 1);
    keys('Topic.listP first page', r.Subscriptions, ['Subscription', 'NextMarker']);
    eq('first subscription', list(r.Subscriptions.Subscription), [{ SubscriptionURL: `${turl(tn)}/subscriptions/to-simplified` }]);
    r = await topic.listP('to-', 1, r.Subscriptions.NextMarker);
    keys('Topic.listP last page', r.Subscriptions, ['Subscription']);
    eq('last subscription', list(r.Subscriptions.Subscription), [{ SubscriptionURL: `${turl(tn)}/subscriptions/to-xml` }]);

    const text = 'héllo topic <&>';
    r = await topic.publishP(text, true, 'tagA');
    keys('publishP answer', r.Message, ['MessageId', 'MessageBodyMD5']);
    match('MessageId', r.Message.MessageId, c.MESSAGE_ID);
    eq('MessageBodyMD5 = MD5 of the base64 text', r.Message.MessageBodyMD5, md5Upper(b64(text)));
    const id = r.Message.MessageId;
    await rejects('publishP to a missing topic', newTopic(P + 'no-topic').publishP('x'), rejected('TopicNotExist'));
    // Long polls: in a cluster a queue on another shard than the topic's
    // gets its delivery relayed after the publish's answer (MNS too fans
    // out after answering, topic spec §2.11).
    const sq = newMQ(qs.SIMPLIFIED);
    r = await sq.recvP(5);
    eq('SIMPLIFIED: recvP decodes the published base64 text', r.Message.MessageBody, text);
    eq('SIMPLIFIED: MD5 of the delivered body', r.Message.MessageBodyMD5, md5Upper(b64(text)));
    ok('SIMPLIFIED: a new MessageId', r.Message.MessageId !== id, r.Message);
    eq('SIMPLIFIED: deleteP of the delivery', await sq.deleteP(r.Message.ReceiptHandle), 204);
    const xq = newMQ(qs.XML);
    r = await xq._openStack.sendP('GET', xq._url + '?waitseconds=5');
    const doc = r.Message.MessageBody;
    match('XML notification', doc, new RegExp('^<\\?xml version="1.0" encoding="utf-8"\\?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/">' +
      `<TopicOwner>${owner}</TopicOwner><TopicName>${tn}</TopicName><Subscriber>${owner}</Subscriber><SubscriptionName>to-xml</SubscriptionName>` +
      `<MessageId>${id}</MessageId><Message>${b64(text)}</Message><MessageMD5>${md5Upper(b64(text))}</MessageMD5>` +
      '<MessageTag>tagA</MessageTag><PublishTime>[0-9]{13}</PublishTime></Notification>$'));
    eq('XML: MD5 of the delivered body', r.Message.MessageBodyMD5, md5Upper(doc));
    eq('XML: deleteP of the delivery', await xq.deleteP(r.Message.ReceiptHandle), 204);
    // One delivery per subscription (peeked through the SDK's own signed
    // sender: peekP would base64-decode the XML document). In a cluster a
    // relayed delivery is at least once (engine/topic_relay.go invariant
    // 1): a copy, the same notification, may be there too.
    for (const [f, q, body] of [['SIMPLIFIED', qs.SIMPLIFIED, b64(text)], ['XML', qs.XML, doc]]) {
      const mq = newMQ(q);
      const peek = mq._openStack.sendP('GET', mq._url + '?peekonly=true');
      if (!c.CLUSTER) {
        await rejects(`${f}: nothing more in ${q} (one delivery)`, peek, rejected('MessageNotExist'));
        continue;
      }
      const more = await peek.then(x => x.Message, e => (rejected('MessageNotExist')(e), undefined));
      if (more) eq(`${f}: a further message in ${q} is a relayed copy of the same notification`, more.MessageBody, body);
    }
    eq('MessageCount after one publish', (await topic.getAttrsP()).Topic.MessageCount, '1');

    eq('unsubscribeP', await topic.unsubscribeP('to-xml'), 204);
    eq('unsubscribeP again', await topic.unsubscribeP('to-xml'), 204);
    await rejects('getAttrsP after unsubscribeP', sub.getAttrsP(), rejected('SubscriptionNotExist'));
    for (const n of [tn, ...names]) eq(`deleteTopicP ${n}`, await mt.deleteTopicP(n), 204);
    eq('deleteTopicP of a deleted topic', await mt.deleteTopicP(tn), 204);
    await rejects('getAttrsP of a deleted topic', topic.getAttrsP(), rejected('TopicNotExist'));
    for (const q of Object.values(qs)) eq(`delete ${q}`, await mns.deleteP(q), 204);
  });

  // HTTP push (topic spec §3.4-§3.6) to receivers in this process,
  // through the SDK's own calls: Topic.subscribeP (its NotifyContentFormat
  // constants name XML and SIMPLIFIED; it passes JSON through as well),
  // Subscription.getAttrsP, Topic.publishP (not base64: the notification
  // then carries the text itself) and Topic.unsubscribeP.
  await step('HTTP push', async () => {
    const mt = newMNSTopic();
    const topics = [P + 'push', P + 'push-retry'];
    for (const n of topics) eq(`createTopicP ${n}`, await mt.createTopicP(n), 201);
    const text = 'héllo "push" <&> 中文'; // xmlbuilder refuses astral characters
    await rejects('subscribeP http://10.1.2.3:9/ep (outside --push-allow)', newTopic(topics[0]).subscribeP('outside', 'http://10.1.2.3:9/ep'), rejected('EndpointInvalid'));
    await rejects('subscribeP http://example.com/ep (a host name not allowed)', newTopic(topics[0]).subscribeP('outside', 'http://example.com/ep'), rejected('EndpointInvalid'));
    await push.scenario({
      endpoint,
      topics,
      text,
      subscribe: async (t, n, ep, strategy, format) => eq(`subscribeP ${n} (${ep})`, await newTopic(t).subscribeP(n, ep, strategy, format), 201),
      attrs: async (t, n) => (await newSub(n, newTopic(t)).getAttrsP()).Subscription,
      publish: async (t, tag) => {
        const r = await newTopic(t).publishP(text, false, tag);
        keys('publishP answer', r.Message, ['MessageId', 'MessageBodyMD5']);
        return { id: r.Message.MessageId, md5: r.Message.MessageBodyMD5 };
      },
      unsubscribe: async (t, n) => eq(`unsubscribeP ${n}`, await newTopic(t).unsubscribeP(n), 204),
    });
    for (const n of topics) eq(`deleteTopicP ${n}`, await mt.deleteTopicP(n), 204);
  });

  // The dead-letter extension of a self-hosted server (topic spec §3.8):
  // Subscription.setAttrsP sends whatever it is given; Subscribe with a
  // DlqPolicy goes through the SDK's own signed sender.
  await step('subscription dead-letter queue', async () => {
    const mt = newMNSTopic();
    const tn = P + 'dlq-topic';
    const src = P + 'dlq-src';
    const dlq = P + 'dlq';
    eq('createTopicP', await mt.createTopicP(tn), 201);
    for (const q of [src, dlq]) eq(`createP ${q}`, await mns.createP(q), 201);
    const topic = newTopic(tn);
    const ep = `acs:mns:cn-hangzhou:${accountId}:queues/${src}`;
    const nine = ['SubscriptionName', 'Subscriber', 'TopicOwner', 'TopicName', 'Endpoint', 'NotifyStrategy', 'NotifyContentFormat', 'CreateTime', 'LastModifyTime'];
    const attrsOf = async n => (await newSub(n, topic).getAttrsP()).Subscription;
    eq('subscribeP without a dead-letter queue', await topic.subscribeP('s', ep), 201);
    keys('no DeadLetterTargetQueue when unset', await attrsOf('s'), nine);
    const sub = newSub('s', topic);
    eq('setAttrsP DeadLetterTargetQueue', await sub.setAttrsP({ DeadLetterTargetQueue: dlq }), 204);
    let a = await attrsOf('s');
    keys('GetSubscriptionAttributes with a dead-letter queue', a, [...nine, 'DeadLetterTargetQueue']);
    eq('DeadLetterTargetQueue echoed flat', a.DeadLetterTargetQueue, dlq);
    eq('Endpoint kept', a.Endpoint, ep);
    await rejects('setAttrsP an unknown DeadLetterTargetQueue', sub.setAttrsP({ DeadLetterTargetQueue: P + 'no-queue' }), rejected('InvalidArgument'));
    await rejects('setAttrsP the subscription\'s own queue', sub.setAttrsP({ DeadLetterTargetQueue: src }), rejected('InvalidArgument'));
    eq('refused sets changed nothing', (await attrsOf('s')).DeadLetterTargetQueue, dlq);
    eq('setAttrsP DlqPolicy Enabled false (off)', await sub.setAttrsP({ DlqPolicy: { Enabled: 'false' } }), 204);
    keys('no DeadLetterTargetQueue after turning it off', await attrsOf('s'), nine);
    eq('setAttrsP DlqPolicy', await sub.setAttrsP({ DlqPolicy: { Enabled: 'true', DeadLetterTargetQueue: dlq } }), 204);
    eq('DlqPolicy echoed flat', (await attrsOf('s')).DeadLetterTargetQueue, dlq);
    const subscribeDLQ = (n, target) => topic._openStack.sendP('PUT', topic._urlSubscription + n,
      { Subscription: { Endpoint: ep, DlqPolicy: { Enabled: 'true', DeadLetterTargetQueue: target } } });
    eq('subscribe with a DlqPolicy', await subscribeDLQ('p', dlq), 201);
    a = await attrsOf('p');
    keys('the DlqPolicy is echoed', a, [...nine, 'DeadLetterTargetQueue']);
    eq('flat, as DeadLetterTargetQueue', a.DeadLetterTargetQueue, dlq);
    eq('subscribe again, identical', await subscribeDLQ('p', dlq), 204);
    await rejects('subscribe with an unknown DeadLetterTargetQueue', subscribeDLQ('u', P + 'no-queue'), rejected('InvalidArgument'));
    await rejects('subscribe with its own queue as target', subscribeDLQ('u', src), rejected('InvalidArgument'));
    await rejects('the refused subscription does not exist', newSub('u', topic).getAttrsP(), rejected('SubscriptionNotExist'));
    eq('deleteTopicP', await mt.deleteTopicP(tn), 204);
    for (const q of [src, dlq]) eq(`deleteP ${q}`, await mns.deleteP(q), 204);
  });

  await step('authentication', async () => {
    const bad = newMQ(qName, false, account(keyId, secret + 'x'));
    await rejects('a wrong secret', bad.getAttrsP(), rejected('SignatureDoesNotMatch'));
    const unknown = newMNS(account('nobody', secret));
    await rejects('an unknown access key id', unknown.listP(P), rejected('InvalidAccessKeyId'));
  });

  await step('deleteP (DeleteQueue)', async () => {
    for (const n of [qName, ...listNames]) eq(`delete ${n}`, await mns.deleteP(n), 204);
    await rejects('delete a deleted queue', mns.deleteP(qName), rejected('QueueNotExist'));
    await rejects('recvP on a deleted queue', mq.recvP(), rejected('QueueNotExist'));
  });

  c.done(`ali-mns 2.6.8 (${mode === 'proxy' ? 'HTTP_PROXY, absolute-form targets' : 'URLs overridden'})`);
})().catch(e => c.fail('unexpected exception', [c.show(e)]));
