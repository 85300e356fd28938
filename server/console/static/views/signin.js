// Sign-in: an access key pair, checked with a signed ListQueue.

import { h, listen } from '../dom.js';

export function signinView({ signIn, describe }) {
  const id = h('input', { id: 'access-key-id', name: 'id', autocomplete: 'username', required: true, size: 30 });
  const secret = h('input', { id: 'access-key-secret', name: 'secret', type: 'password', autocomplete: 'current-password', required: true, size: 30 });
  const err = h('p', { id: 'signin-error', class: 'error', role: 'alert' });
  const button = h('button', { id: 'signin-button', class: 'primary', type: 'submit' }, 'Sign in');
  const form = h('form', { id: 'signin', class: 'card signin' },
    h('h1', {}, 'Sign in'),
    h('p', { class: 'muted' }, 'With an access key of this smqd (smqd prints one on first start; it is in the data directory\'s credentials file). ' +
      'The secret stays in this tab (sessionStorage) and signs each request; it is never sent.'),
    h('label', {}, 'Access key id', id),
    h('label', {}, 'Access key secret', secret),
    button, err);
  listen(form, 'submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    button.disabled = true;
    try {
      await signIn(id.value.trim(), secret.value.trim());
    } catch (e) {
      err.textContent = 'Sign-in failed: ' + describe(e);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}
