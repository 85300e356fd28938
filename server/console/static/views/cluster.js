// Cluster status, from the signed GET /cluster of the node the console is
// served by (polled): the node's health, the members with their addresses,
// and per shard its leader, term, commit and applied indexes, and on the
// shards this node leads each follower's lag.

import { h, replace, fmt } from '../dom.js';

export function clusterView({ client, main, every, describe }) {
  const head = h('p', { id: 'cluster-node' });
  const members = h('tbody', { id: 'cluster-members' });
  const shards = h('tbody', { id: 'cluster-shards' });
  const status = h('p', { class: 'error', id: 'poll-error', role: 'alert' });
  const warnings = h('div', { id: 'cluster-warnings' });
  replace(main,
    h('h1', {}, 'Cluster'),
    status,
    head,
    warnings,
    h('h2', {}, 'Members'),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Node'), h('th', {}, 'Raft address'), h('th', {}, 'API address'))), members),
    h('h2', {}, 'Shards'),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'Shard'), h('th', {}, 'Role here'),
      h('th', { class: 'num' }, 'Leader'), h('th', { class: 'num' }, 'Term'), h('th', { class: 'num' }, 'Commit'),
      h('th', { class: 'num' }, 'Applied'), h('th', {}, 'Followers (node: lag)'))), shards),
    h('p', { class: 'muted' }, 'From GET /cluster of this node every 1.5 s. Followers\u2019 lag is known only on the shards this node leads; ' +
      'membership changes are smqctl cluster add|rm (docs/operations.md).'));

  async function refresh() {
    const st = await client.cluster();
    replace(head, `Node ${st.node_id}: `, h('strong', { class: st.healthy ? 'ok' : 'error', id: 'cluster-health' },
      st.healthy ? 'serving every shard' : 'not ready: ' + (st.problem || 'a shard has no leader')),
    ` \u00b7 ${fmt(st.forwarded || 0)} requests forwarded`);
    replace(members, (st.members || []).map((m) => h('tr', {},
      h('td', {}, String(m.node_id) + (m.node_id === st.node_id ? ' (this node)' : '')),
      h('td', {}, m.raft), h('td', {}, m.api || '\u2014'))));
    replace(shards, (st.shards || []).map((s) => h('tr', {},
      h('td', { class: 'num' }, String(s.shard)), h('td', {}, s.role),
      h('td', { class: 'num' }, s.leader ? String(s.leader) : 'none'), h('td', { class: 'num' }, fmt(s.term)),
      h('td', { class: 'num' }, fmt(s.commit_index)), h('td', { class: 'num' }, fmt(s.applied_index)),
      h('td', {}, (s.followers || []).map((f) => `${f.node_id}: ${f.active === false ? `not answering (lag ${fmt(f.lag)})` : fmt(f.lag)}`).join(', ') || '\u2014'))));
    replace(warnings, (st.voters_not_members || []).map((id) => h('p', { class: 'error', role: 'alert' },
      `Node ${id} votes in the shards but this node knows no address for it: it sends it nothing, and one more failure may stop a shard. ` +
      'If another member lists it, this node learns its address from the members within a minute; if no member does, remove it (smqctl cluster rm ' + id + ').')));
    status.textContent = '';
  }

  every(refresh, (e) => { status.textContent = 'Refresh failed: ' + describe(e); });
}
