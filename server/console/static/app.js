// The console's shell: the session, the router and polling.
//
// The session is the access key pair, kept in sessionStorage: it lives as
// long as the tab, is never sent anywhere but into signatures, and is
// never put in a cookie (so the browser cannot attach it to anything).
// Views are modules under views/; each gets a context and draws into
// <main>. Polling is per view: leaving a view stops its timers.

import { Client, MNSError } from './mns.js';
import { h, replace, say } from './dom.js';
import { signinView } from './views/signin.js';
import { queuesView } from './views/queues.js';
import { queueView } from './views/queue.js';
import { metricsView } from './views/metrics.js';
import { clusterView } from './views/cluster.js';
import { topicsView } from './views/topics.js';
import { topicView } from './views/topic.js';

const SESSION = 'smqd.session';
const POLL_MS = 1500;

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const signout = document.getElementById('signout');

let features = { topics: false, cluster: false };
let timers = [];
let generation = 0;

function session() {
  try {
    return JSON.parse(sessionStorage.getItem(SESSION) || 'null');
  } catch {
    return null;
  }
}

// signIn checks the key with a signed ListQueue and keeps it.
async function signIn(id, secret) {
  const client = new Client(id, secret);
  try {
    await client.listQueues({ limit: 1 });
  } catch (e) {
    // AccessDenied comes after the signature is checked: the key is right,
    // its policies (--policy-file) only do not let it list queues. Its
    // views show what it may not do as they go.
    if (!(e instanceof MNSError && e.code === 'AccessDenied')) throw e;
  }
  sessionStorage.setItem(SESSION, JSON.stringify({ id, secret }));
  location.hash = '#/queues';
  route();
}

function signOut() {
  sessionStorage.removeItem(SESSION);
  location.hash = '#/signin';
  route();
}

// every runs fn now and then every ms while the current view is shown;
// fn's errors are shown, not thrown.
function every(ms, fn, onError) {
  const gen = generation;
  let busy = false;
  const tick = async () => {
    if (busy || gen !== generation) return;
    busy = true;
    const run = (async () => {
      try {
        await fn();
      } catch (e) {
        if (gen === generation) onError(e);
      }
    })();
    running.add(run);
    try {
      await run;
    } finally {
      running.delete(run);
      busy = false;
    }
  };
  tick();
  timers.push(setInterval(tick, ms));
}

// running holds the refreshes under way.
const running = new Set();

// quiet stops the current view's refreshes and resolves once none is
// under way: a view deleting what it shows calls it first, so that no
// refresh asks for it after it is gone (and gets a 404).
function quiet() {
  stopTimers();
  return Promise.all([...running]);
}

function stopTimers() {
  generation++;
  for (const t of timers) clearInterval(t);
  timers = [];
}

// describe turns an error into a line for the page.
export function describe(e) {
  if (e instanceof MNSError) {
    return `${e.message} (HTTP ${e.status}${e.requestId ? ', request ' + e.requestId : ''})`;
  }
  return String(e && e.message ? e.message : e);
}

// attempt runs an action of the page (async fn); if it fails, note says
// "what failed: " and why.
async function attempt(note, what, fn) {
  try {
    await fn();
  } catch (e) {
    say(note, false, `${what} failed: ${describe(e)}`);
  }
}

function route() {
  stopTimers();
  const hash = location.hash || '#/queues';
  const s = session();
  const [, view, ...rest] = hash.split('/');
  for (const a of nav.querySelectorAll('a')) {
    a.classList.toggle('active', a.dataset.view === view || a.dataset.view === view + 's'); // queue: Queues, topic: Topics
    if (a.dataset.feature) a.hidden = !features[a.dataset.feature];
  }
  if (!s || view === 'signin') {
    nav.hidden = true;
    signout.hidden = true;
    who.textContent = '';
    replace(main, signinView({ signIn, describe }));
    return;
  }
  nav.hidden = false;
  signout.hidden = false;
  who.textContent = s.id;
  let client;
  try {
    client = new Client(s.id, s.secret);
  } catch (e) {
    replace(main, h('p', { class: 'error' }, describe(e)));
    return;
  }
  const ctx = { client, main, describe, attempt, every: (fn, onError) => every(POLL_MS, fn, onError), quiet, features };
  // A name in the address that is not percent-encoding (#/queue/%E0) threw
  // here, and the page stayed on the last view with its refreshes stopped.
  let name;
  try {
    name = decodeURIComponent(rest.join('/'));
  } catch {
    replace(main, h('p', { class: 'error' }, `No such page: ${hash} is not a well-formed address.`));
    return;
  }
  switch (view) {
    case 'queue':
      queueView(ctx, name);
      break;
    case 'metrics':
      metricsView(ctx);
      break;
    case 'cluster':
      clusterView(ctx);
      break;
    case 'topics':
      topicsView(ctx);
      break;
    case 'topic':
      topicView(ctx, name);
      break;
    default:
      queuesView(ctx);
  }
}

async function start() {
  signout.addEventListener('click', signOut);
  try {
    const r = await fetch('/console/features.json', { cache: 'no-store', credentials: 'omit' });
    if (r.ok) features = { ...features, ...(await r.json()) };
  } catch {
    // Without features.json the optional pages stay hidden.
  }
  window.addEventListener('hashchange', route);
  route();
}

start();
