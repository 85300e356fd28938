package server

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/smqd/smqd/server/console"
)

// The console's redrive (static/redrive.js) run by Node against a fake
// client, for what a browser test cannot arrange: answers of 503 (a
// cluster shard electing its leader) and a send slower than the queue's
// visibility timeout.
func TestConsoleRedriveRetriesAndKeepsInvisible(t *testing.T) {
	runRedriveJS(t, redriveJSTest)
}

// runRedriveJS runs script as test.js beside the console's redrive.js and
// the modules it imports, in Node; it fails the test if Node exits with
// an error.
func runRedriveJS(t *testing.T, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("this test needs Node.js (>= 16) on PATH (Debian: apt-get install nodejs); it never skips")
	}
	dir := t.TempDir()
	for _, f := range []string{"redrive.js", "mns.js", "md5.js"} {
		b, err := fs.ReadFile(console.Files(), f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type":"module"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.js"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, filepath.Join(dir, "test.js")).CombinedOutput()
	t.Logf("node:\n%s", out)
	if err != nil {
		t.Fatalf("node: %v", err)
	}
}

// redriveJSTest is a queue "dead" (visibility timeout 1 s) whose handles
// expire with it and are spent by a change of visibility, as smqd's are.
const redriveJSTest = `
import { redrive } from './redrive.js';
import { MNSError } from './mns.js';

function fakeQueue({ fail503 = new Set(), sendDelay = 0, storeThen503 = false } = {}) {
  const vis = 1000;
  let seq = 0;
  const msgs = new Map(); // id → {id, body, md5, handle, visibleAt}
  for (const body of ['a', 'b', 'c']) {
    const id = 'M' + body;
    msgs.set(id, { id, body, md5: 'MD5' + body, handle: '', visibleAt: 0 });
  }
  const sent = [];
  const stats = { retried: 0, changes: 0 };
  const once = (op) => {
    if (fail503.has(op)) {
      fail503.delete(op);
      stats.retried++;
      throw new MNSError(503, 'ServiceUnavailable', 'the shard has no leader yet; retry', 'R');
    }
  };
  const live = (h) => [...msgs.values()].find((m) => m.handle === h && Date.now() < m.visibleAt);
  const client = {
    async getQueue(name) {
      once('getQueue');
      return { QueueName: name, ActiveMessages: [...msgs.values()].filter((m) => Date.now() >= m.visibleAt).length, VisibilityTimeout: vis / 1000 };
    },
    async receive(name, { n }) {
      once('receive');
      const out = [];
      for (const m of msgs.values()) {
        if (out.length < n && Date.now() >= m.visibleAt) {
          m.handle = 'H' + (++seq);
          m.visibleAt = Date.now() + vis;
          out.push({ MessageId: m.id, ReceiptHandle: m.handle, MessageBody: m.body, MessageBodyMD5: m.md5, Priority: 8 });
        }
      }
      return out;
    },
    async batchSend(tq, copies) {
      once('batchSend');
      if (sendDelay) await new Promise((r) => setTimeout(r, sendDelay));
      sent.push(...copies.map((c) => c.MessageBody));
      if (storeThen503) {
        storeThen503 = false; // stored, and the answer says it may not be
        throw new MNSError(503, 'ServiceUnavailable', "the leader of the queue's shard did not answer; the request may or may not have run: x", 'R');
      }
      return copies.map((c, i) => ({ MessageId: 'C' + sent.length + '-' + i, MessageBodyMD5: 'MD5' + c.MessageBody }));
    },
    async batchDelete(name, handles) {
      once('batchDelete');
      const failed = {};
      for (const h of handles) {
        const m = live(h);
        if (m) msgs.delete(m.id);
        else failed[h] = new MNSError(404, 'MessageNotExist', 'the receipt handle has expired', 'R');
      }
      return failed;
    },
    async changeVisibility(name, h, secs) {
      stats.changes++;
      const m = live(h);
      if (!m) throw new MNSError(404, 'MessageNotExist', 'the receipt handle has expired', 'R');
      m.handle = 'H' + (++seq);
      m.visibleAt = Date.now() + secs * 1000;
      return { ReceiptHandle: m.handle };
    },
  };
  return { client, msgs, sent, stats };
}

function check(what, cond, got) {
  if (!cond) {
    console.error('FAIL: ' + what + ': ' + JSON.stringify(got));
    process.exitCode = 1;
  } else console.log('ok: ' + what);
}

// Every call answered 503 once: each is tried again and all three move.
{
  const f = fakeQueue({ fail503: new Set(['getQueue', 'receive', 'batchSend', 'batchDelete']) });
  const res = await redrive(f.client, 'dead', { to: 'orders' });
  check('503s tried again: moved 3, none copied twice, queue empty', res.moved === 3 && res.copied === 0 && res.resent === 0 && f.msgs.size === 0 && f.sent.length === 3, { res, left: f.msgs.size, sent: f.sent, stats: f.stats });
  check('four 503s met', f.stats.retried === 4, f.stats);
}

// A send stored and answered 503 "may or may not have run": sent again,
// twice at the target, and counted so.
{
  const f = fakeQueue({ storeThen503: true });
  const res = await redrive(f.client, 'dead', { to: 'orders' });
  check('a send that may or may not have run: moved 3, resent 3', res.moved === 3 && res.resent === 3 && f.sent.length === 6, { res, sent: f.sent });
}

// A send 2.5 times the visibility timeout: the originals are kept
// invisible and deleted with their latest handles.
{
  const f = fakeQueue({ sendDelay: 2500 });
  const res = await redrive(f.client, 'dead', { to: 'orders' });
  check('a slow send: moved 3, copied 0, queue empty', res.moved === 3 && res.copied === 0 && f.msgs.size === 0, { res, left: f.msgs.size, stats: f.stats });
  check('the originals were kept invisible', f.stats.changes >= 3, f.stats);
}
`
