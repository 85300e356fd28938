// Pages of APIs that are on their way (topics and subscriptions). The
// navigation shows them only when /console/features.json says the server
// has the API; until their views are written, they say so.

import { h, replace } from '../dom.js';

const TEXT = {
  topics: ['Topics', 'Topics and subscriptions will be listed here, through the signed MNS topic API.'],
};

export function placeholderView({ main }, which) {
  const [title, text] = TEXT[which];
  replace(main, h('h1', {}, title), h('p', { class: 'muted', id: 'placeholder' }, text));
}
