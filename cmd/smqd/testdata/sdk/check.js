// A small check reporter shared by the SDK scripts.
//
// Every check prints one line, "ok   <step>: <what>" or
// "FAIL <step>: <what>" followed by what was expected and what came back;
// the script exits with status 1 at the first failure (and on any
// unexpected exception, with the SDK's error). The Go test
// (cmd/smqd/sdk_test.go) shows this output when a script fails, or with -v.
'use strict';

const crypto = require('crypto');
const util = require('util');

let stepName = '(setup)';
let passed = 0;

function show(v) {
  return util.inspect(v, { depth: 6, breakLength: Infinity, maxStringLength: 300 });
}

function fail(what, lines) {
  console.log(`FAIL ${stepName}: ${what}`);
  for (const l of lines) console.log(`     ${l}`);
  process.exit(1);
}

function pass(what) {
  passed++;
  console.log(`ok   ${stepName}: ${what}`);
}

// eq checks got === want (deep equality for objects and arrays).
function eq(what, got, want) {
  if (!util.isDeepStrictEqual(got, want)) {
    fail(what, [`expected ${show(want)}`, `got      ${show(got)}`]);
  }
  pass(`${what} = ${show(want)}`);
}

// ok checks a condition; got is shown on failure.
function ok(what, cond, got) {
  if (!cond) fail(what, [`got ${show(got)}`]);
  pass(what);
}

// match checks that got is a string matching re.
function match(what, got, re) {
  if (typeof got !== 'string' || !re.test(got)) {
    fail(what, [`expected a string matching ${re}`, `got ${show(got)}`]);
  }
  pass(`${what} matches ${re}`);
}

// between checks lo <= got <= hi for numbers (or numeric strings).
function between(what, got, lo, hi) {
  const n = Number(got);
  if (typeof got === 'object' || !Number.isFinite(n) || n < lo || n > hi) {
    fail(what, [`expected a number in [${lo}, ${hi}]`, `got ${show(got)}`]);
  }
  pass(`${what} = ${n}, in [${lo}, ${hi}]`);
}

// keys checks the exact set of fields of an object (order ignored).
function keys(what, obj, want) {
  const got = obj && typeof obj === 'object' ? Object.keys(obj).filter(k => k !== '$').sort() : obj;
  const w = [...want].sort();
  if (!util.isDeepStrictEqual(got, w)) {
    fail(what, [`expected exactly the fields ${show(w)}`, `got ${show(got)}`, `object ${show(obj)}`]);
  }
  pass(`${what} has exactly ${want.length} fields`);
}

// rejects awaits p, which must fail; check(err) then inspects the error.
async function rejects(what, p, check) {
  let res;
  try {
    res = await p;
  } catch (e) {
    pass(`${what} fails`);
    if (check) check(e);
    return e;
  }
  fail(what, ['expected the call to fail', `it succeeded with ${show(res)}`]);
}

// step runs one named group of checks; an unexpected exception fails it.
// SMQD_SKIP_STEPS, a regular expression: steps whose name matches are
// skipped, and say so (for a run against a server that lacks a feature;
// no run of sdk_test.go skips any step).
const SKIP = process.env.SMQD_SKIP_STEPS ? new RegExp(process.env.SMQD_SKIP_STEPS, 'i') : null;

async function step(name, fn) {
  stepName = name;
  if (SKIP && SKIP.test(name)) {
    console.log(`SKIP ${name} (SMQD_SKIP_STEPS)`);
    return;
  }
  try {
    await fn();
  } catch (e) {
    fail('unexpected exception', [show(e), ...(e && e.stack ? String(e.stack).split('\n').slice(0, 8) : [])]);
  }
}

function done(suite) {
  console.log(`${suite}: all ${passed} checks passed`);
}

function md5Upper(s) {
  return crypto.createHash('md5').update(Buffer.from(s, 'utf8')).digest('hex').toUpperCase();
}

function sleep(ms) {
  return new Promise(r => setTimeout(r, ms));
}

// Wire formats of smqd (spec §7.2, §7.3, §2.4).
const MESSAGE_ID = /^[0-9A-F]{32}$/;
const MD5 = /^[0-9A-F]{32}$/;
const RECEIPT_HANDLE = /^[A-Za-z0-9-]+$/; // spec §0.6: no character that needs escaping
const REQUEST_ID = /^[0-9A-F]{24}$/;
const RECEIVED_FIELDS = ['MessageId', 'ReceiptHandle', 'MessageBodyMD5', 'MessageBody', 'EnqueueTime',
  'NextVisibleTime', 'FirstDequeueTime', 'DequeueCount', 'Priority'];
const PEEKED_FIELDS = ['MessageId', 'MessageBodyMD5', 'MessageBody', 'EnqueueTime', 'FirstDequeueTime',
  'DequeueCount', 'Priority'];
const QUEUE_FIELDS = ['QueueName', 'CreateTime', 'LastModifyTime', 'DelaySeconds', 'MaximumMessageSize',
  'MessageRetentionPeriod', 'VisibilityTimeout', 'PollingWaitSeconds', 'ActiveMessages', 'InactiveMessages',
  'DelayMessages', 'LoggingEnabled'];

// CLUSTER lists the endpoints (http://host:port) of every node when the
// script runs against a cluster (SMQD_CLUSTER_ENDPOINTS, comma-separated:
// sdk_cluster_test.go), else it is null. A cluster differs from a single
// node by design in two ways the topic steps see: a queue subscription
// whose queue is on another shard than the topic gets its delivery relayed
// after the publish's answer, at least once (so possibly twice), and the
// topic shard's leader makes the HTTP pushes, signed with its own key and
// naming its own certificate URL.
const CLUSTER = process.env.SMQD_CLUSTER_ENDPOINTS
  ? process.env.SMQD_CLUSTER_ENDPOINTS.split(',').map(s => s.trim()).filter(s => s !== '')
  : null;

// env returns a required environment variable.
function env(name) {
  const v = process.env[name];
  if (!v) {
    console.log(`FAIL (setup): environment variable ${name} is not set`);
    process.exit(1);
  }
  return v;
}

module.exports = {
  eq, ok, match, between, keys, rejects, step, done, fail, md5Upper, sleep, env, show, CLUSTER,
  MESSAGE_ID, MD5, RECEIPT_HANDLE, REQUEST_ID, RECEIVED_FIELDS, PEEKED_FIELDS, QUEUE_FIELDS,
};

// SLACK_MS absorbs the rounding of times to milliseconds on both sides.
const SLACK_MS = 5;

// checkMessage checks every field of a received (want.received) or peeked
// message against what was sent: the exact field set (spec §3.7, §3.8),
// MessageId and ReceiptHandle formats, the body and the MD5 of its wire
// form (want.wireBody: ali-mns sends base64, spec §7.6), Priority,
// DequeueCount, and the times: EnqueueTime within the send's window
// [want.sentLo, want.sentHi], FirstDequeueTime = EnqueueTime before any
// receive, else within the first receive's window, NextVisibleTime =
// receive time + want.vt seconds.
function checkMessage(what, m, want) {
  keys(`${what}`, m, want.received ? RECEIVED_FIELDS : PEEKED_FIELDS);
  match(`${what} MessageId`, m.MessageId, MESSAGE_ID);
  if (want.id !== undefined) eq(`${what} MessageId (as returned by the send)`, m.MessageId, want.id);
  eq(`${what} MessageBody`, m.MessageBody, want.body);
  eq(`${what} MessageBodyMD5 (MD5 of the body on the wire)`, m.MessageBodyMD5, md5Upper(want.wireBody !== undefined ? want.wireBody : want.body));
  eq(`${what} Priority`, m.Priority, String(want.priority));
  eq(`${what} DequeueCount`, m.DequeueCount, String(want.dequeueCount));
  match(`${what} EnqueueTime (Unix ms)`, m.EnqueueTime, /^\d{13}$/);
  if (want.sentLo !== undefined) between(`${what} EnqueueTime`, m.EnqueueTime, want.sentLo - SLACK_MS, want.sentHi + SLACK_MS);
  match(`${what} FirstDequeueTime (Unix ms)`, m.FirstDequeueTime, /^\d{13}$/);
  if (want.dequeueCount === 0) {
    eq(`${what} FirstDequeueTime before any receive (= EnqueueTime)`, m.FirstDequeueTime, m.EnqueueTime);
  } else {
    ok(`${what} FirstDequeueTime >= EnqueueTime`, Number(m.FirstDequeueTime) >= Number(m.EnqueueTime), m);
  }
  if (want.firstDequeueTime !== undefined) eq(`${what} FirstDequeueTime (unchanged since the first receive)`, m.FirstDequeueTime, want.firstDequeueTime);
  if (want.received) {
    match(`${what} ReceiptHandle`, m.ReceiptHandle, RECEIPT_HANDLE);
    match(`${what} NextVisibleTime (Unix ms)`, m.NextVisibleTime, /^\d{13}$/);
    if (want.recvLo !== undefined) {
      between(`${what} NextVisibleTime = receive time + ${want.vt} s`, m.NextVisibleTime,
        want.recvLo + want.vt * 1000 - SLACK_MS, want.recvHi + want.vt * 1000 + SLACK_MS);
      if (want.dequeueCount === 1) {
        between(`${what} FirstDequeueTime = receive time`, m.FirstDequeueTime, want.recvLo - SLACK_MS, want.recvHi + SLACK_MS);
        eq(`${what} NextVisibleTime - FirstDequeueTime on the first receive`, Number(m.NextVisibleTime) - Number(m.FirstDequeueTime), want.vt * 1000);
      }
    }
  }
}

// checkQueueAttrs checks the 12 elements of GetQueueAttributes (spec §3.3)
// against want (values as numbers or strings; LoggingEnabled as 'True' or
// 'False'), and CreateTime/LastModifyTime as Unix seconds in [lo, hi].
function checkQueueAttrs(what, q, want, timeLo, timeHi) {
  keys(`${what}`, q, QUEUE_FIELDS);
  for (const k of Object.keys(want)) eq(`${what} ${k}`, q[k], String(want[k]));
  match(`${what} CreateTime (Unix seconds)`, q.CreateTime, /^\d{10}$/);
  between(`${what} CreateTime`, q.CreateTime, Math.floor(timeLo / 1000) - 1, Math.ceil(timeHi / 1000) + 1);
  match(`${what} LastModifyTime (Unix seconds)`, q.LastModifyTime, /^\d{10}$/);
  ok(`${what} LastModifyTime >= CreateTime`, Number(q.LastModifyTime) >= Number(q.CreateTime), q);
}

module.exports.checkMessage = checkMessage;
module.exports.checkQueueAttrs = checkQueueAttrs;
