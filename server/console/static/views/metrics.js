// Metrics overview, from the same signed API as the other pages (ListQueue
// with meta, polled): totals by state, their change per second, a chart,
// and the queues with the largest backlog. smqd's Prometheus metrics
// (/metrics) are for Prometheus; the console does not read them. And an
// online backup to download (signed GET /backup).

import { h, listen, replace, say, fmt, fmtRate } from '../dom.js';
import { chart, History } from '../chart.js';

export function metricsView({ client, main, every, describe, attempt }) {
  const hist = new History(120);
  const tiles = h('div', { class: 'tiles', id: 'metric-tiles' });
  const graph = h('div', { id: 'metrics-chart' });
  const top = h('tbody', { id: 'top-queues' });
  const status = h('p', { class: 'error', id: 'poll-error', role: 'alert' });
  const backupNote = h('p', { id: 'backup-result', role: 'status' });
  replace(main,
    h('h1', {}, 'Metrics'),
    tiles,
    h('div', { class: 'card' }, h('div', { class: 'legend' }, h('span', { class: 'c1' }, 'active, all queues'), h('span', { class: 'c2' }, 'inactive, all queues')), graph),
    h('h2', {}, 'Largest backlogs'),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Queue'), h('th', { class: 'num' }, 'Backlog'),
      h('th', { class: 'num' }, 'Change'))), top),
    status,
    h('p', { class: 'muted' }, 'Counts come from signed ListQueue calls every 1.5 s; changes are per second between two polls. ' +
      'Throughput counters, latencies and storage figures are on /metrics for Prometheus (docs/operations.md).'),
    h('h2', {}, 'Backup'),
    h('div', { class: 'row' }, listen(h('button', { type: 'button', id: 'backup' }, 'Download a backup'), 'click', () => backup())),
    backupNote,
    h('p', { class: 'muted' }, 'An online backup of this node, or of the whole cluster through any node, as smqctl backup makes it; ' +
      'restore it with smqd restore (docs/operations.md, "Backups"). Large backups are better made with smqctl backup.'));

  // backup streams GET /backup into a file the user picks where the
  // browser can (the File System Access API), else into memory and then a
  // download.
  function backup() {
    const name = `smqd-${new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-')}.smqd`;
    attempt(backupNote, 'Backup', async () => {
      let file;
      if (window.showSaveFilePicker) {
        try {
          file = await window.showSaveFilePicker({ suggestedName: name }); // while the click still counts
        } catch (e) {
          if (e.name === 'AbortError') return say(backupNote, true, 'Backup cancelled.');
          throw e;
        }
      }
      say(backupNote, true, 'Backup running…');
      const resp = await client.download('/backup');
      let bytes;
      if (file) {
        await resp.body.pipeTo(await file.createWritable());
        const saved = await file.getFile();
        bytes = saved.size;
        if (!await wholeBackup(saved)) {
          throw new Error(`the server's backup was cut short (${fmt(bytes)} bytes, no end frame): ${file.name} is not a whole backup; delete it and try again (the reason is in the server's log)`);
        }
      } else {
        const blob = await resp.blob();
        bytes = blob.size;
        if (!await wholeBackup(blob)) {
          throw new Error(`the server's backup was cut short (${fmt(bytes)} bytes, no end frame): nothing saved; try again (the reason is in the server's log)`);
        }
        const a = h('a', { href: URL.createObjectURL(blob), download: name });
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 60000);
      }
      say(backupNote, true, `Backup of ${fmt(bytes)} bytes saved as ${file ? file.name : name}. Restore it with smqd restore --from FILE --data-dir DIR.`);
    });
  }

  // wholeBackup says whether blob ends with a backup archive's end frame
  // (engine/archive: 'E', three zero bytes, the payload's length, an
  // 8-byte checksum, then a JSON object). The server answers 200 before
  // the backup starts, so one that fails midway is a download cut short
  // that looks clean: the console reported it saved (backup audit). The
  // checksums are smqd restore's to check.
  async function wholeBackup(blob) {
    const tail = new Uint8Array(await blob.slice(Math.max(0, blob.size - 1024)).arrayBuffer());
    for (let p = tail.length - 16; p >= 0; p--) {
      if (tail[p] !== 0x45 || tail[p + 1] || tail[p + 2] || tail[p + 3]) continue;
      const len = tail[p + 4] | tail[p + 5] << 8 | tail[p + 6] << 16 | tail[p + 7] << 24;
      if (p + 16 + len !== tail.length) continue;
      try {
        const end = JSON.parse(new TextDecoder().decode(tail.subarray(p + 16)));
        if (end && typeof end === 'object') return true;
      } catch (e) { /* not the end frame */ }
    }
    return false;
  }

  async function refresh() {
    const queues = await client.allQueues();
    const t = Date.now() / 1000;
    let a = 0, i = 0, d = 0;
    for (const q of queues) {
      a += q.ActiveMessages;
      i += q.InactiveMessages;
      d += q.DelayMessages;
      hist.add('q:' + q.QueueName, t, q.ActiveMessages + q.InactiveMessages + q.DelayMessages);
    }
    hist.add('a', t, a);
    hist.add('i', t, i);
    hist.add('d', t, d);
    const tile = (id, v, k, r) => h('div', { class: 'tile', id }, h('div', { class: 'v' }, fmt(v)),
      h('div', { class: 'k' }, k, r === undefined ? '' : ' ' + fmtRate(r)));
    replace(tiles,
      tile('metric-queues', queues.length, 'queues'),
      tile('metric-active', a, 'active', hist.rate('a')),
      tile('metric-inactive', i, 'inactive', hist.rate('i')),
      tile('metric-delayed', d, 'delayed', hist.rate('d')));
    replace(graph, chart([{ points: hist.points('a') }, { points: hist.points('i') }]));
    const ranked = queues.map((q) => [q.QueueName, q.ActiveMessages + q.InactiveMessages + q.DelayMessages])
      .sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1)).slice(0, 10);
    replace(top, ranked.map(([n, b]) => h('tr', {},
      h('td', {}, h('a', { href: '#/queue/' + encodeURIComponent(n) }, n)),
      h('td', { class: 'num' }, fmt(b)), h('td', { class: 'num' }, fmtRate(hist.rate('q:' + n))))));
    status.textContent = '';
  }

  every(refresh, (e) => { status.textContent = 'Refresh failed: ' + describe(e); });
}
