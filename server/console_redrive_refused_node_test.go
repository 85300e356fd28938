package server

import "testing"

// The console's redrive (static/redrive.js, run by Node) whose batch
// delete is refused whole (403 AccessDenied: the key lacks
// mns:BatchDeleteMessage) has stored the copies and left the originals:
// the run fails, and its error and progress must count them as copied
// (a later run moves them again). It said nothing of them.
func TestConsoleRedriveCountsCopiesWhoseDeleteWasRefused(t *testing.T) {
	runRedriveJS(t, redriveRefusedJSTest)
}

// redriveRefusedJSTest: a queue "dead" of two messages whose sends are
// stored and whose delete is refused.
const redriveRefusedJSTest = `
import { redrive } from './redrive.js';
import { MNSError } from './mns.js';

const msgs = [{ MessageId: 'M1', ReceiptHandle: 'H1', MessageBody: 'a', MessageBodyMD5: 'MD5a', Priority: 8 },
  { MessageId: 'M2', ReceiptHandle: 'H2', MessageBody: 'b', MessageBodyMD5: 'MD5b', Priority: 8 }];
let received = false;
let stored = 0;
const client = {
  async getQueue(name) { return { QueueName: name, ActiveMessages: 2, VisibilityTimeout: 30 }; },
  async receive() { if (received) return []; received = true; return msgs; },
  async batchSend(tq, copies) {
    stored += copies.length;
    return copies.map((c, i) => ({ MessageId: 'C' + i, MessageBodyMD5: 'MD5' + c.MessageBody }));
  },
  async batchDelete() { throw new MNSError(403, 'AccessDenied', 'the access key is not allowed mns:BatchDeleteMessage', 'R'); },
  async changeVisibility(name, h) { return { ReceiptHandle: h }; },
};
let told = null;
let err = null;
try {
  await redrive(client, 'dead', { to: 'orders', progress: (r) => { told = { ...r }; } });
} catch (e) {
  err = e;
}
const fail = (what, got) => { console.error('FAIL: ' + what + ': ' + JSON.stringify(got)); process.exitCode = 1; };
if (!(err instanceof MNSError) || err.code !== 'AccessDenied') fail('the run fails with the refusal', String(err));
else if (!err.redrive || err.redrive.copied !== stored || err.redrive.moved !== 0) fail('the error carries 2 copied, 0 moved', err.redrive);
else if (!told || told.copied !== stored) fail('progress told 2 copied', told);
else console.log('ok: ' + stored + ' copies stored and counted copied');
`
