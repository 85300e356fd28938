// Redrive: a dead-letter queue's messages back to the queues they were
// dead-lettered from (or all to one queue), with the signed API a client
// has, as `smqctl queue redrive` does (cmd/smqctl/ctl/redrive.go, whose
// invariants this keeps):
//  1. a message is deleted from the dead-letter queue only after its
//     copy's send was acknowledged with the MD5 of the body received;
//  2. the copy has the same body, priority and properties, less the three
//     DLQ system properties;
//  3. a run handles at most the messages visible when it starts;
//  4. without a queue named, a message goes back only to a queue whose
//     dead-letter queue is this one: any sender may set DLQSourceArn;
//  5. what cannot move stays, is named with the reason, and is made
//     visible again when the run ends.

import { MNSError } from './mns.js';

const DLQ_PROPS = new Set(['DLQMessageType', 'DLQSourceArn', 'DLQOriginMessageId']);

function sys(m, name) {
  const p = (m.SystemProperties || []).find((x) => x.Name === name);
  return p ? p.Value : '';
}

// target is the queue m goes to, or {why} it stays.
function target(m, dlq, to) {
  if (to) return { q: to };
  const arn = sys(m, 'DLQSourceArn');
  if (!arn) return { why: 'no DLQSourceArn (not dead-lettered here): name a queue to move it to' };
  if (sys(m, 'DLQMessageType') === 'TOPIC') return { why: `dead-lettered from topic subscription ${arn}: name a queue to move it to` };
  const i = arn.lastIndexOf(':/queues/');
  const q = i < 0 ? '' : arn.slice(i + ':/queues/'.length);
  if (!q || q.includes('/') || q === dlq) return { why: `DLQSourceArn ${arn} names no other queue: name a queue to move it to` };
  return { q };
}

// redrive moves up to max messages (0: every one visible at the start)
// of dlq, each to its source queue or all to to, and reports
// {moved, to: {queue: n}, copied, left: [{id, why}]}. progress(result)
// is called after each batch.
export async function redrive(client, dlq, { to = '', max = 0, progress = () => {} } = {}) {
  // Into itself: every message would be sent again into the queue it is
  // in, without the properties that say where it came from (smqctl
  // refuses it too).
  if (to === dlq) throw new Error(`the queue to move them to is ${dlq} itself`);
  const q = await client.getQueue(dlq);
  const sources = new Map(); // queue → why its messages stay ('' to move them)
  const sourceWhy = async (sq) => {
    if (sources.has(sq)) return sources.get(sq);
    let why = '';
    try {
      const a = await client.getQueue(sq);
      const dt = a.DeadLetterTargetQueue || '';
      if (dt !== dlq && !dt.endsWith(`:/queues/${dlq}`)) {
        why = `its DLQSourceArn names queue ${sq}, whose dead-letter queue is not ${dlq} (any sender may set the property): name a queue to move it to`;
      }
    } catch (e) {
      if (!(e instanceof MNSError)) throw e;
      if (e.code !== 'QueueNotExist') return `its DLQSourceArn names queue ${sq}, whose dead-letter queue could not be read (${e.code}): name a queue to move it to, or run again`;
      why = `its DLQSourceArn names queue ${sq}: QueueNotExist: name a queue to move it to`;
    }
    sources.set(sq, why);
    return why;
  };
  let limit = q.ActiveMessages;
  if (max > 0) limit = Math.min(limit, max);
  const res = { moved: 0, to: Object.create(null), copied: 0, left: [] };
  const left = new Map(); // message id → {id, why, handle}
  const leave = (m, why) => {
    const l = left.get(m.MessageId) || { id: m.MessageId };
    Object.assign(l, { why, handle: m.ReceiptHandle });
    if (!left.has(m.MessageId)) res.left.push(l);
    left.set(m.MessageId, l);
  };
  try {
    for (let handled = 0; handled < limit;) {
      const msgs = await client.receive(dlq, { n: Math.min(16, limit - handled), wait: 0 });
      if (msgs.length === 0) break;
      handled += msgs.length;
      const byTarget = new Map();
      for (const m of msgs) {
        const t = target(m, dlq, to);
        if (!t.why && !to) t.why = await sourceWhy(t.q);
        if (t.why) {
          leave(m, t.why);
          continue;
        }
        const copy = { MessageBody: m.MessageBody, Priority: m.Priority, UserProperties: m.UserProperties,
          SystemProperties: (m.SystemProperties || []).filter((p) => !DLQ_PROPS.has(p.Name)) };
        if (!byTarget.has(t.q)) byTarget.set(t.q, []);
        byTarget.get(t.q).push({ m, copy });
      }
      const stored = new Map(); // handle → target
      for (const [tq, entries] of byTarget) {
        for (const [{ m }, r] of await sendAll(client, tq, entries)) {
          if (r.ErrorCode) leave(m, `${tq} refused it: ${r.ErrorCode}: ${r.ErrorMessage}`);
          else if ((r.MessageBodyMD5 || '').toUpperCase() !== (m.MessageBodyMD5 || '').toUpperCase()) {
            leave(m, `${tq} stored message ${r.MessageId} with body MD5 ${r.MessageBodyMD5}, not ${m.MessageBodyMD5}`);
          } else stored.set(m.ReceiptHandle, tq);
        }
      }
      if (stored.size > 0) {
        const failed = await client.batchDelete(dlq, [...stored.keys()]);
        for (const [hd, tq] of stored) {
          if (failed[hd]) res.copied++;
          else {
            res.moved++;
            res.to[tq] = (res.to[tq] || 0) + 1;
          }
        }
      }
      progress(res);
    }
  } finally {
    for (const l of res.left) {
      try {
        await client.changeVisibility(dlq, l.handle, 1);
      } catch (e) {
        if (!(e instanceof MNSError && e.code === 'MessageNotExist')) throw e;
      }
    }
  }
  return res;
}

// sendAll sends entries ({m, copy}) to tq and pairs each with its result;
// a batch refused whole for a bad entry (InvalidArgument) is sent one by
// one, so that one message does not hold back the rest; a missing queue
// refuses each.
async function sendAll(client, tq, entries) {
  try {
    const rs = await client.batchSend(tq, entries.map((e) => e.copy));
    return entries.map((e, i) => [e, rs[i]]);
  } catch (e) {
    if (!(e instanceof MNSError)) throw e;
    if (e.code === 'QueueNotExist' || e.code === 'InvalidArgument' && entries.length === 1) {
      return entries.map((x) => [x, { ErrorCode: e.code, ErrorMessage: e.detail }]);
    }
    if (e.code !== 'InvalidArgument') throw e;
    const out = [];
    for (const x of entries) out.push(...await sendAll(client, tq, [x]));
    return out;
  }
}
