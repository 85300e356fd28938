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
//     visible again when the run ends;
//  6. a request answered 503 (a cluster shard electing its leader) is
//     tried again, 6 times in all, 250 ms apart and doubling; a batch of
//     copies sent again after a 503 "may or may not have run" may be
//     stored twice, and is counted so (resent);
//  7. while a batch's copies are sent, its originals are kept invisible:
//     every half of the queue's visibility timeout each gets the whole
//     timeout again, and the delete and the release use the latest
//     receipt handles (cmd/smqctl/ctl/keep.go).

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

// call runs f, again after a 503 (invariant 6), telling retry of each.
export async function call(f, { tries = 6, wait = 250, retry = () => {} } = {}) {
  for (let t = 1; ; t++) {
    try {
      return await f();
    } catch (e) {
      if (!(e instanceof MNSError && e.status === 503) || t >= tries) throw e;
      retry(e);
      await new Promise((r) => setTimeout(r, wait));
      wait *= 2;
    }
  }
}

// keep keeps msgs of queue q, received at received (ms), invisible for
// visMs at a time (invariant 7) until end(), which waits for a change
// under way and returns a Map of each received handle to its latest.
export function keep(client, q, msgs, visMs, received) {
  const cur = new Map(msgs.map((m) => [m.ReceiptHandle, m.ReceiptHandle]));
  let stopped = false;
  let timer = null;
  let running = Promise.resolve();
  const round = async () => {
    for (const [first, h] of cur) {
      if (stopped) return;
      try {
        // One try each: the next round comes in half a timeout.
        const r = await client.changeVisibility(q, h, Math.max(1, Math.floor(visMs / 1000)));
        if (r && r.ReceiptHandle) cur.set(first, r.ReceiptHandle);
      } catch {
        // The next round tries again; the delete then finds out.
      }
    }
  };
  const schedule = (at) => {
    if (stopped || !(visMs > 0)) return;
    timer = setTimeout(() => {
      running = round().finally(() => schedule(Date.now() + visMs / 2));
    }, Math.max(0, at - Date.now()));
  };
  schedule(received + visMs / 2);
  return {
    async end() {
      stopped = true;
      clearTimeout(timer);
      await running.catch(() => {});
      return cur;
    },
  };
}

// redrive moves up to max messages (0: every one visible at the start)
// of dlq, each to its source queue or all to to, and reports
// {moved, to: {queue: n}, copied, resent, left: [{id, why}]}. progress(result)
// is called after each batch.
export async function redrive(client, dlq, { to = '', max = 0, progress = () => {} } = {}) {
  // Into itself: every message would be sent again into the queue it is
  // in, without the properties that say where it came from (smqctl
  // refuses it too).
  if (to === dlq) throw new Error(`the queue to move them to is ${dlq} itself`);
  const q = await call(() => client.getQueue(dlq));
  const visMs = (Number(q.VisibilityTimeout) || 0) * 1000;
  const sources = new Map(); // queue → why its messages stay ('' to move them)
  const sourceWhy = async (sq) => {
    if (sources.has(sq)) return sources.get(sq);
    let why = '';
    try {
      const a = await call(() => client.getQueue(sq));
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
  const res = { moved: 0, to: Object.create(null), copied: 0, resent: 0, left: [] };
  const left = new Map(); // message id → {id, why, handle}
  const leave = (m, why) => {
    const l = left.get(m.MessageId) || { id: m.MessageId };
    Object.assign(l, { why, handle: m.ReceiptHandle });
    if (!left.has(m.MessageId)) res.left.push(l);
    left.set(m.MessageId, l);
  };
  try {
    for (let handled = 0; handled < limit;) {
      let received = Date.now(); // at most when the queue hid them
      const msgs = await call(() => {
        received = Date.now();
        return client.receive(dlq, { n: Math.min(16, limit - handled), wait: 0 });
      });
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
      const kept = keep(client, dlq, msgs, visMs, received);
      let cur;
      try {
        for (const [tq, entries] of byTarget) {
          for (const [{ m }, r] of await sendAll(client, tq, entries, res)) {
            if (r.ErrorCode) leave(m, `${tq} refused it: ${r.ErrorCode}: ${r.ErrorMessage}`);
            else if ((r.MessageBodyMD5 || '').toUpperCase() !== (m.MessageBodyMD5 || '').toUpperCase()) {
              leave(m, `${tq} stored message ${r.MessageId} with body MD5 ${r.MessageBodyMD5}, not ${m.MessageBodyMD5}`);
            } else stored.set(m.ReceiptHandle, tq);
          }
        }
      } catch (e) {
        throw copiedThen(e, res, stored.size, progress); // stored for another queue: their originals stay
      } finally {
        cur = await kept.end();
        for (const l of res.left) if (cur.has(l.handle)) l.handle = cur.get(l.handle); // the release's
      }
      if (stored.size > 0) {
        let failed;
        try {
          failed = await call(() => client.batchDelete(dlq, [...stored.keys()].map((h) => cur.get(h))));
        } catch (e) {
          throw copiedThen(e, res, stored.size, progress); // refused whole (AccessDenied) or unanswered
        }
        for (const [hd, tq] of stored) {
          if (failed[cur.get(hd)]) res.copied++;
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
        await call(() => client.changeVisibility(dlq, l.handle, 1));
      } catch (e) {
        if (!(e instanceof MNSError && e.code === 'MessageNotExist')) throw e;
      }
    }
  }
  return res;
}

// copiedThen counts n copies stored whose originals stay here (a run
// that ends on error e after storing them: a later run moves them again,
// a duplicate), tells progress, and returns e carrying the result
// (e.redrive) for the page to say so (until 2026-12-07 a run whose delete
// was refused said nothing of its copies; dead-letter audit).
function copiedThen(e, res, n, progress) {
  if (n > 0) {
    res.copied += n;
    progress(res);
  }
  if (e && typeof e === 'object') e.redrive = res;
  return e;
}

// sendAll sends entries ({m, copy}) to tq and pairs each with its result;
// a batch refused whole for a bad entry (InvalidArgument) is sent one by
// one, so that one message does not hold back the rest; a missing queue
// refuses each. A batch sent again after a 503 saying that the send may
// or may not have run counts in res.resent.
async function sendAll(client, tq, entries, res) {
  try {
    let uncertain = false;
    const retry = (e) => { uncertain = uncertain || /may or may not have run/.test(e.detail || ''); };
    const rs = await call(() => client.batchSend(tq, entries.map((e) => e.copy)), { retry });
    if (uncertain) res.resent += entries.length;
    return entries.map((e, i) => [e, rs[i]]);
  } catch (e) {
    if (!(e instanceof MNSError)) throw e;
    if (e.code === 'QueueNotExist' || e.code === 'InvalidArgument' && entries.length === 1) {
      return entries.map((x) => [x, { ErrorCode: e.code, ErrorMessage: e.detail }]);
    }
    if (e.code !== 'InvalidArgument') throw e;
    const out = [];
    for (const x of entries) out.push(...await sendAll(client, tq, [x], res));
    return out;
  }
}
