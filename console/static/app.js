// agentd's web console: one page, routed by the URL's hash, talking only to
// the daemon's HTTP API (docs/api.md). No framework and no build step: the
// file is served as written. Every text from the daemon is set with
// textContent, never as HTML, because transcripts carry what models and web
// pages wrote.
'use strict';

const TOKEN_KEY = 'agentd.token';
const state = { token: localStorage.getItem(TOKEN_KEY) || '', view: null, draft: null, models: null };

// ---------- small DOM helpers ----------

// h builds an element: h('p', {class: 'x', onclick: fn}, 'text', child).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
}

function announce(text) {
  const st = document.getElementById('status');
  st.textContent = '';
  // A fresh text node after clearing makes screen readers speak a repeat.
  setTimeout(() => { st.textContent = text; }, 30);
}

const fmtInt = (n) => (n || 0).toLocaleString('en-US');
const fmtTime = (t) => (t ? new Date(t).toLocaleString() : '');
const esc = encodeURIComponent;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// The events the daemon keeps in a chat's activity log (chat.Activity):
// the page reads them back when it opens.
const ACTIVITY = new Set(['compacted', 'healed', 'turn.problem', 'compaction.applied', 'tools.loaded', 'memories.learned']);

// canonicalJSON writes v with its objects' keys sorted: one event read
// live and read back from a store compares equal whatever order the store
// kept its keys in.
function canonicalJSON(v) {
  if (Array.isArray(v)) return `[${v.map(canonicalJSON).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJSON(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// A long transcript renders its newest RENDER_FIRST messages at once, then
// RENDER_BATCH older ones a task.
const RENDER_FIRST = 100;
const RENDER_BATCH = 400;

// ---------- the API ----------

class APIError extends Error {
  constructor(status, kind, message) {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

let tokenWait = null;

// askToken shows the token form and resolves once a token is saved. Calls
// that got a 401 at the same time share one form.
function askToken() {
  if (tokenWait) return tokenWait.promise;
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  tokenWait = { promise, resolve };
  const sec = document.getElementById('auth');
  sec.hidden = false;
  const input = document.getElementById('token-input');
  input.value = '';
  input.focus();
  announce('This agentd wants an API token.');
  return promise;
}

function saveToken(tok) {
  state.token = tok;
  if (tok) localStorage.setItem(TOKEN_KEY, tok);
  else localStorage.removeItem(TOKEN_KEY);
  document.getElementById('auth').hidden = true;
  if (tokenWait) {
    const w = tokenWait;
    tokenWait = null;
    w.resolve();
  }
}

// allChats reads every page of the chat list.
async function allChats() {
  const all = [];
  for (let after = ''; ;) {
    const { chats, next } = await api('GET', '/v1/chats?limit=1000' + (after ? '&after=' + encodeURIComponent(after) : ''));
    all.push(...chats);
    if (!next) return all;
    after = next;
  }
}

// api calls the daemon. A 401 asks for a token and tries again with it; any
// other failure is an APIError carrying the daemon's own message.
async function api(method, path, body, opts = {}) {
  for (;;) {
    const headers = {};
    if (state.token) headers.Authorization = 'Bearer ' + state.token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (opts.accept) headers.Accept = opts.accept;
    const resp = await fetch(path, {
      method, headers, signal: opts.signal, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (resp.status === 401) {
      await askToken();
      continue;
    }
    if (!resp.ok) {
      let e = {};
      try { e = await resp.json(); } catch { /* not JSON: use the status */ }
      throw new APIError(resp.status, e.kind || '', e.error || `${method} ${path}: ${resp.status} ${resp.statusText}`);
    }
    if (opts.raw) return resp;
    const text = await resp.text();
    return text ? JSON.parse(text) : null;
  }
}

// readSSE reads Server-Sent Events from a fetch response; EventSource cannot
// send an Authorization header, so the console reads the stream itself.
async function readSSE(resp, onEvent) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, '\n');
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = block.split('\n').filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (!data) continue; // a keepalive comment
      let ev;
      try { ev = JSON.parse(data); } catch { continue; }
      onEvent(ev);
    }
  }
}

async function loadModels() {
  if (!state.models) state.models = await api('GET', '/v1/models');
  return state.models;
}

function modelSelect(id, current, withDefault) {
  const sel = h('select', { id });
  if (withDefault) sel.append(h('option', { value: '' }, 'Default model'));
  loadModels().then((m) => {
    for (const mo of m.data || []) {
      const label = `${mo.id} (${fmtInt(mo.window)} tokens${mo.local ? ', on this computer' : ''})`;
      sel.append(h('option', { value: mo.id, selected: mo.id === current }, label));
    }
    if (current && ![...sel.options].some((o) => o.value === current)) {
      sel.append(h('option', { value: current, selected: true }, current));
    }
  }).catch((e) => sel.append(h('option', { value: current || '' }, current || 'models unavailable: ' + e.message)));
  return sel;
}

function errorBox(e) {
  return h('p', { class: 'error', role: 'alert' }, e.message || String(e));
}

// ---------- chats list ----------

class ChatsView {
  async mount(main) {
    const list = h('ul', { class: 'chat-list', id: 'chat-list', 'aria-label': 'Chats' });
    const title = h('input', { id: 'new-title', type: 'text', placeholder: 'optional', autocomplete: 'off' });
    const sel = modelSelect('new-model', '', true);
    const form = h('form', { class: 'new-chat', id: 'new-chat', onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const c = await api('POST', '/v1/chats', { model: sel.value || undefined, title: title.value.trim() || undefined });
        location.hash = '#/chats/' + esc(c.id);
      } catch (e) { form.append(errorBox(e)); }
    } },
    h('h2', {}, 'New chat'),
    h('label', { for: 'new-model' }, 'Model'), sel,
    h('label', { for: 'new-title' }, 'Title'), title,
    h('button', { type: 'submit' }, 'New chat'));
    main.replaceChildren(h('h1', { tabindex: '-1' }, 'Chats'), form, h('h2', {}, 'Your chats'), list);
    main.querySelector('h1').focus();
    try {
      const chats = await allChats();
      chats.sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
      if (!chats.length) list.append(h('li', { class: 'empty' }, 'No chats yet.'));
      for (const c of chats) {
        list.append(h('li', {},
          h('a', { href: '#/chats/' + esc(c.id) }, c.title || 'Untitled chat'),
          h('span', { class: 'meta' }, ` ${c.model} · ${fmtTime(c.created_at)}`)));
      }
    } catch (e) { list.append(h('li', {}, errorBox(e))); }
  }
  destroy() {}
}

// ---------- one chat ----------

class ChatView {
  constructor(id) {
    this.id = id;
    this.abort = new AbortController();
    this.rendered = new Map(); // seq → element
    this.owner = new Map(); // turn id → the stream that shows it ('post' or 'watch')
    this.bubbles = new Map(); // turn id → the answer streaming in
    this.pending = new Map(); // turn id → a pulsing compaction card
    this.userSeq = new Map(); // turn id → the person's message seq
    this.summary = null; // the latest Compacted (or context's summary)
    this.chat = null;
    this.maxSeq = 0; // the highest seq shown: later ones are simply appended
    this.frag = null; // while a transcript page renders, where it collects
    this.placeAfter = undefined; // while activity replays, the seq its card follows
    this.progressEl = null; // the one transient "waiting for…" line
    // activity key → how many of its events one way in showed and the
    // other has not yet brought (see shownAlready)
    this.heardLive = new Map();
    this.replayed = new Map();
  }

  destroy() { this.abort.abort(); }

  async mount(main) {
    this.transcript = h('div', { id: 'transcript', class: 'transcript', role: 'log', 'aria-live': 'polite', 'aria-label': 'Transcript' });
    this.input = h('textarea', { id: 'composer-input', rows: '3', 'aria-describedby': 'composer-hint', autocomplete: 'off' });
    this.sendButton = h('button', { type: 'submit', id: 'send' }, 'Send');
    this.input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.form.requestSubmit();
      }
    });
    this.form = h('form', { class: 'composer', id: 'composer', onsubmit: (ev) => { ev.preventDefault(); this.submit(); } },
      h('label', { for: 'composer-input' }, 'Message'),
      this.input,
      h('p', { id: 'composer-hint', class: 'hint' }, 'Enter sends, Shift+Enter adds a line. ', h('code', {}, '/compact [what to keep]'), ' summarises the start of the chat now.'),
      this.sendButton);
    this.titleEl = h('h1', { id: 'chat-title', tabindex: '-1' }, 'Chat');
    this.live = h('span', { class: 'live', id: 'live', 'data-live': 'false' }, 'connecting…');
    this.modelSlot = h('span', { class: 'model-slot' });
    this.context = h('aside', { class: 'context', id: 'context', 'aria-labelledby': 'context-title' },
      h('h2', { id: 'context-title' }, 'What the model is sent'), h('p', {}, 'Loading…'));
    main.replaceChildren(h('div', { class: 'chat-page' },
      h('section', { class: 'chat', 'aria-labelledby': 'chat-title' },
        h('header', { class: 'chat-head' }, this.titleEl, this.modelSlot, this.live),
        this.transcript, this.form),
      this.context));
    try {
      this.chat = await api('GET', `/v1/chats/${esc(this.id)}`, undefined, { signal: this.abort.signal });
    } catch (e) {
      if (this.abort.signal.aborted) return;
      this.transcript.append(errorBox(e));
      return;
    }
    this.titleEl.textContent = this.chat.title || 'Untitled chat';
    document.title = `${this.titleEl.textContent} · agentd`;
    this.showModel();
    if (state.draft && state.draft.id === this.id) {
      this.input.value = state.draft.text;
      state.draft = null;
    }
    this.following = true;
    window.addEventListener('scroll', () => {
      const el = document.scrollingElement;
      this.following = el.scrollHeight - el.scrollTop - el.clientHeight < 120;
    }, { signal: this.abort.signal, passive: true });
    this.input.focus();
    this.watch();
    // Busy until what is stored is all in the log: a screen reader waits
    // for the rebuilt page rather than reading it piece by piece.
    this.transcript.setAttribute('aria-busy', 'true');
    await this.loadTranscript();
    await this.loadActivity();
    this.transcript.removeAttribute('aria-busy');
    this.scroll();
    this.refreshContext();
  }

  showModel() {
    const sel = modelSelect('chat-model', this.chat.model, false);
    sel.addEventListener('change', () => this.switchModel(sel.value));
    this.modelSlot.replaceChildren(h('label', { for: 'chat-model' }, 'Model '), sel);
  }

  // loadTranscript renders the stored messages, all or those after seq
  // after, and returns once every one is in the page. A long chat's newest
  // messages, the ones in view, are read and shown first.
  async loadTranscript(after) {
    const read = async (q) => (await api('GET', `/v1/chats/${esc(this.id)}/transcript${q}`, undefined, { signal: this.abort.signal })).messages;
    try {
      const last = this.chat?.messages || 0;
      let messages;
      if (!after && last > RENDER_FIRST) {
        const tail = await read(`?from_seq=${last - RENDER_FIRST + 1}`);
        await this.renderAll(tail, null);
        messages = await read(`?to_seq=${last - RENDER_FIRST}`);
        await this.renderAll(messages, tail.length ? this.rendered.get(tail[0].seq) : null);
      } else {
        messages = await read(after ? `?from_seq=${after + 1}` : '');
        await this.renderAll(messages, null);
      }
      if (!messages.length && !this.transcript.querySelector('.msg')) {
        this.transcript.append(h('p', { class: 'empty', id: 'empty-note' }, 'No messages yet. Say something below.'));
      }
    } catch (e) {
      if (!this.abort.signal.aborted) this.transcript.append(errorBox(e));
    }
  }

  // watch follows every event of the chat, reconnecting after a break; a
  // reconnect reloads the transcript, since events in the gap are gone. The
  // daemon ends a stream that fell behind with stream.dropped: then it
  // reconnects at once and reads only what came after the last seq it was told.
  async watch() {
    let delay = 500;
    let again = false;
    let dropped = null;
    while (!this.abort.signal.aborted) {
      try {
        const resp = await api('GET', `/v1/chats/${esc(this.id)}/events`, undefined, { accept: 'text/event-stream', raw: true, signal: this.abort.signal });
        this.setLive(true);
        if (again) await this.loadTranscript(dropped && dropped.last_seq);
        again = true;
        dropped = null;
        delay = 500;
        await readSSE(resp, (ev) => {
          if (ev.type === 'stream.dropped') dropped = ev.data || {};
          else this.handle(ev, 'watch');
        });
      } catch (e) {
        if (this.abort.signal.aborted) return;
      }
      this.setLive(false);
      if (dropped) continue;
      await sleep(delay);
      delay = Math.min(delay * 2, 10000);
    }
  }

  setLive(on) {
    this.live.dataset.live = String(on);
    this.live.textContent = on ? 'live' : 'reconnecting…';
  }

  // renderAll shows messages (in seq order) in front of the element above,
  // or after every one shown when it is null, newest first: the last
  // RENDER_FIRST at once, then the older ones a batch a task, each above
  // the last, so the page answers meanwhile. Each batch is built off the
  // page and added in one go, and the style sheet lets the browser lay out
  // only the messages in view (BENCHMARKS.md has the figures).
  async renderAll(messages, above) {
    for (let end = messages.length, batch = RENDER_FIRST; end > 0 && !this.abort.signal.aborted; batch = RENDER_BATCH) {
      const start = Math.max(0, end - batch);
      if (end < messages.length) above = this.rendered.get(messages[end].seq);
      this.frag = document.createDocumentFragment();
      try {
        for (let i = start; i < end; i++) this.renderMessage(messages[i]);
      } finally {
        const f = this.frag;
        this.frag = null;
        if (!above) {
          this.transcript.append(f);
          this.scroll();
        } else {
          // The summary line stays right in front of its first kept message.
          (this.summaryEl && this.summaryEl.nextSibling === above ? this.summaryEl : above).before(f);
        }
      }
      end = start;
      if (end > 0) await sleep(0);
    }
  }

  // shownAlready says whether an activity event came in the other way
  // already, and notes that it came this way. A page opened while its chat
  // is busy hears an event live and reads it again in the stored activity,
  // in either order: it shows the card once. Keys are counted, so events
  // alike are each shown.
  shownAlready(live, type, turnID, data) {
    const key = `${type}\u0000${turnID || ''}\u0000${canonicalJSON(data)}`;
    const [mine, other] = live ? [this.heardLive, this.replayed] : [this.replayed, this.heardLive];
    const owed = other.get(key) || 0;
    if (owed > 0) {
      if (owed === 1) other.delete(key); else other.set(key, owed - 1);
      return true;
    }
    mine.set(key, (mine.get(key) || 0) + 1);
    return false;
  }

  // loadActivity rebuilds the cards of what happened in this chat (problems
  // with their next step, compactions, heals, tools loaded, memories
  // learned) from its stored activity, each after the message it followed.
  async loadActivity() {
    const items = [];
    try {
      for (let after = 0; ;) {
        const page = await api('GET', `/v1/chats/${esc(this.id)}/activity?limit=1000&after=${after}`, undefined, { signal: this.abort.signal });
        items.push(...(page.activity || []));
        if (!page.next) break;
        after = page.next;
      }
    } catch (e) {
      if (!this.abort.signal.aborted) this.note('problem', `The chat's activity could not be read: ${e.message}`);
      return;
    }
    for (const it of items) {
      this.placeAfter = it.after_seq;
      try { this.replay(it); } finally { this.placeAfter = undefined; }
    }
  }

  // replay shows one stored activity item as its live event did.
  replay(it) {
    const d = it.data || {};
    if (this.shownAlready(false, it.type, it.turn_id, d)) return;
    switch (it.type) {
      case 'turn.problem':
        // A problem is stored right after the person's message it answers.
        if (it.turn_id && !this.userSeq.has(it.turn_id)) this.userSeq.set(it.turn_id, it.after_seq);
        this.problemCard(it.turn_id, d);
        break;
      case 'compacted': this.setSummary(d); break;
      case 'compaction.applied': this.appliedCard(it.turn_id, d); break;
      case 'healed': this.healedNote(d); break;
      case 'tools.loaded': this.toolsNote(d); break;
      case 'memories.learned': this.learnedNote(d); break;
    }
  }

  healedNote(d) {
    this.note('healed', `A “too long” from ${d.model} was healed: earlier messages were summarised and the request sent again` +
      (d.window_learnt ? `; its window is now taken as ${fmtInt(d.window_learnt)} tokens.` : '.'));
  }

  toolsNote(d) { this.note('tools', `Tools loaded for this chat: ${(d.names || []).join(', ')}`); }

  learnedNote(d) {
    const n = (d.ids || []).length;
    this.place(h('p', { class: 'note learned', role: 'note' },
      `Learned ${n} ${n === 1 ? 'memory' : 'memories'} from this chat` + (d.waiting ? ', waiting for your OK: ' : ': '),
      h('a', { href: '#/memories/' + (d.waiting ? 'waiting' : 'active') }, 'see memories')), this.placeAfter);
  }

  // showProgress keeps one transient line at the end of the transcript
  // saying what the turn waits for; the turn's next other event drops it.
  showProgress(ev) {
    const d = ev.data || {};
    let text;
    if (ev.type === 'tool.progress') {
      text = `${d.tool}: ${d.message}` + (d.total ? ` (${fmtInt(d.done)} of ${fmtInt(d.total)})` : '');
    } else {
      const what = {
        summary: 'Summarising the start of this chat', compaction: 'Condensing this turn to make room',
        'tool-index': 'Loading the tools this message names', model: `Waiting for ${d.detail || 'the model'}`,
        retry: d.detail || 'Retrying', tools: `Running ${d.detail || 'tools'}`,
      }[d.waiting_for] || d.detail || 'Working';
      text = `${what}… ${Math.round((d.elapsed_ms || 0) / 1000)} s`;
    }
    if (!this.progressEl) this.progressEl = h('p', { class: 'progress', id: 'progress', role: 'status' });
    this.progressEl.textContent = text;
    this.progressEl.dataset.kind = ev.type;
    this.transcript.append(this.progressEl);
    this.scroll();
  }

  clearProgress() { this.progressEl?.remove(); }

  // handle applies one event. Both the send's own stream and the watch
  // stream carry a turn's events; the first to show a turn owns it, so
  // nothing is shown twice.
  handle(ev, source) {
    if (this.abort.signal.aborted) return;
    if (ev.turn_id) {
      const o = this.owner.get(ev.turn_id);
      if (o === undefined) this.owner.set(ev.turn_id, source);
      else if (o !== source) return;
    }
    const d = ev.data || {};
    if (ev.type === 'fold.waiting' || ev.type === 'tool.progress') {
      this.showProgress(ev);
      return;
    }
    this.clearProgress();
    if (ACTIVITY.has(ev.type) && this.shownAlready(true, ev.type, ev.turn_id, d)) return;
    switch (ev.type) {
      case 'turn.started':
        this.userSeq.set(ev.turn_id, d.user_seq);
        this.sendButton.dataset.busy = 'true';
        break;
      case 'message':
      case 'tool.result':
        if (d.role === 'assistant') this.dropBubble(ev.turn_id);
        this.renderMessage(d);
        break;
      case 'message.delta':
        this.bubble(ev.turn_id).text.append(d.text || '');
        this.scroll();
        break;
      case 'thinking.delta': {
        const b = this.bubble(ev.turn_id);
        b.thinking.hidden = false;
        b.thinkingText.append(d.text || '');
        break;
      }
      case 'message.reset':
        // The answer streamed was taken back and is asked again: the
        // retry's text replaces what was shown.
        this.bubbles.get(ev.turn_id)?.text.replaceChildren();
        break;
      case 'thinking.reset':
        // The answer was cut while the model reasoned and is asked again:
        // the retry's reasoning replaces what was shown.
        this.bubbles.get(ev.turn_id)?.thinkingText.replaceChildren();
        break;
      case 'turn.completed':
        this.dropBubble(ev.turn_id);
        delete this.sendButton.dataset.busy;
        this.refreshContext();
        break;
      case 'turn.problem':
        this.problemCard(ev.turn_id, d);
        break;
      case 'compacted':
        this.setSummary(d);
        this.refreshContext();
        break;
      case 'compaction.started':
        this.startedCard(ev.turn_id, d);
        break;
      case 'compaction.applied':
        this.appliedCard(ev.turn_id, d);
        break;
      case 'healed':
        this.healedNote(d);
        break;
      case 'tools.loaded':
        this.toolsNote(d);
        this.refreshContext();
        break;
      case 'memories.learned':
        this.learnedNote(d);
        break;
    }
  }

  // scroll follows new text only when the reader is already at the end, so
  // reading back is never interrupted.
  scroll() {
    if (!this.following) return;
    const el = document.scrollingElement;
    el.scrollTop = el.scrollHeight;
  }

  // place puts an element where it belongs in the log: before the first
  // message with a higher seq (a reload can deliver old ones late), else
  // last. The common case, a seq past every one shown, is a plain append.
  place(el, seq) {
    document.getElementById('empty-note')?.remove();
    if (this.frag) {
      this.frag.append(el); // renderAll: a batch, in order
      return;
    }
    if (seq !== undefined && seq < this.maxSeq) {
      let next = null;
      let nextSeq = Infinity;
      for (const [k, other] of this.rendered) {
        if (k > seq && k < nextSeq && other.parentNode) { next = other; nextSeq = k; }
      }
      if (next) {
        // The summary line stays right in front of its first kept message.
        const before = this.summaryEl && this.summaryEl.nextSibling === next ? this.summaryEl : next;
        before.before(el);
        return;
      }
    }
    this.transcript.append(el);
    if (this.progressEl?.isConnected) this.transcript.append(this.progressEl);
    this.scroll();
  }

  renderMessage(m) {
    if (!m || !m.seq || this.rendered.has(m.seq)) return;
    const who = { user: m.origin ? `You (${m.origin})` : 'You', assistant: 'Assistant', tool: 'Tool' }[m.role] || m.role;
    const head = h('header', { class: 'msg-head' },
      h('span', { class: 'seq' }, `#${m.seq}`), ' ',
      h('span', { class: 'who' }, who),
      m.model ? h('span', { class: 'model' }, ` · ${m.model}`) : null,
      h('time', { datetime: m.created_at }, ` · ${fmtTime(m.created_at)}`));
    const el = h('article', { class: `msg role-${m.role}`, 'data-seq': m.seq, 'aria-label': `Message ${m.seq}, ${who}` }, head);
    if (m.role === 'tool') {
      const label = `Result of ${m.tool_name || 'a tool'}` + (m.is_error ? ' (error)' : '') + (m.untrusted ? ' (outside text)' : '');
      el.append(h('details', { class: 'tool-result' }, h('summary', {}, label), h('pre', {}, m.content || '')));
    } else {
      if (m.thinking) el.append(h('details', { class: 'thinking' }, h('summary', {}, 'Thinking'), h('pre', {}, m.thinking)));
      if (m.content) el.append(h('div', { class: 'text' }, m.content));
      for (const c of m.tool_calls || []) {
        let args = c.arguments || '';
        try { args = JSON.stringify(JSON.parse(args), null, 2); } catch { /* shown as written */ }
        el.append(h('details', { class: 'tool-call' }, h('summary', {}, 'Calls ', h('code', {}, c.name)), h('pre', {}, args)));
      }
    }
    if ((m.images || []).length) el.append(h('p', { class: 'meta' }, `${m.images.length} picture(s)`));
    for (const a of m.attachments || []) {
      el.append(h('p', { class: 'meta attachment' }, `Attached: ${a.name} (${a.media_type}, ${fmtInt(a.size)} bytes)`));
    }
    if (m.partial) el.append(h('p', { class: 'meta partial' }, `Cut short: ${m.problem || 'the answer did not finish'}`));
    if (m.max_output_reached) el.append(h('p', { class: 'meta partial' }, 'Stopped at the chat\'s max_output_tokens'));
    // The provider's refusal is kept, but later requests leave the exchange out.
    if (m.refused) el.append(h('p', { class: 'meta refused' }, 'Refused by the provider: the model no longer sees this exchange'));
    this.rendered.set(m.seq, el);
    this.place(el, m.seq);
    this.maxSeq = Math.max(this.maxSeq, m.seq);
    // A summary line waiting for its first kept message goes in front of it.
    if (this.summaryEl && this.summary.first_kept_seq === m.seq) el.before(this.summaryEl);
  }

  bubble(turnID) {
    let b = this.bubbles.get(turnID);
    if (b) return b;
    const text = h('div', { class: 'text' });
    const thinkingText = h('pre', {});
    const thinking = h('details', { class: 'thinking', hidden: true }, h('summary', {}, 'Thinking'), thinkingText);
    const el = h('article', { class: 'msg role-assistant streaming', 'aria-busy': 'true', 'aria-label': 'The answer, streaming in' },
      h('header', { class: 'msg-head' }, h('span', { class: 'who' }, 'Assistant'), h('span', { class: 'model' }, ' · writing…')),
      thinking, text);
    b = { el, text, thinking, thinkingText };
    this.bubbles.set(turnID, b);
    this.place(el);
    return b;
  }

  dropBubble(turnID) {
    const b = this.bubbles.get(turnID);
    if (!b) return;
    b.el.remove();
    this.bubbles.delete(turnID);
  }

  // setSummary shows the one quiet line where the model's word-for-word
  // memory starts; a newer fold replaces it, so only the latest shows.
  setSummary(c) {
    if (!c) return;
    const same = this.summary && this.summaryEl?.isConnected && this.summary.first_kept_seq === c.first_kept_seq &&
      (this.summary.summary || '') === (c.summary || '') && (this.summary.digest || '') === (c.digest || '');
    if (same) return; // keep it as it is, open or closed
    this.summary = c;
    this.summaryEl?.remove();
    this.summaryEl = null;
    if (!(c.first_kept_seq > 1) || (!c.summary && !c.digest)) return;
    const body = c.summary
      ? h('div', { class: 'summary-text' }, c.summary)
      : h('div', { class: 'summary-text' }, h('p', {}, 'No summary could be written; these facts were kept:'), h('pre', {}, c.digest));
    const el = h('details', { class: 'summary-line', id: 'summary-line', 'data-first-kept': c.first_kept_seq },
      h('summary', {}, `Earlier messages are summarised for ${c.model || this.chat?.model || 'the model'}`), body);
    this.summaryEl = el;
    let before = this.rendered.get(c.first_kept_seq);
    if (!before) {
      for (const [k, other] of this.rendered) if (k > c.first_kept_seq && (!before || Number(before.dataset.seq) > k)) before = other;
    }
    if (before && before.isConnected) this.transcript.insertBefore(el, before);
    else this.transcript.append(el);
  }

  card(cls, ...kids) {
    const el = h('div', { class: `card ${cls}`, role: 'status' }, ...kids);
    this.place(el, this.placeAfter);
    return el;
  }

  note(cls, text) {
    this.place(h('p', { class: `note ${cls}`, role: 'note' }, text), this.placeAfter);
  }

  startedCard(turnID, d) {
    const n = d.targets;
    const el = this.card('compaction pulsing', h('strong', {}, 'Making room'),
      ` — summarising ${n ? fmtInt(n) + ' ' + (n === 1 ? 'part' : 'parts') : 'the earliest part'} of this chat…`);
    el.setAttribute('aria-busy', 'true');
    this.pending.set(turnID || '', el);
    return el;
  }

  appliedCard(turnID, d) {
    const el = h('div', { class: 'card compaction applied', role: 'status' },
      h('strong', {}, 'Made room'),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Targets'), h('dd', {}, fmtInt(d.targets)),
        h('dt', {}, 'Tokens saved'), h('dd', {}, `${fmtInt(d.tokens_saved)} (${fmtInt(d.tokens_before)} → ${fmtInt(d.tokens_after)})`),
        h('dt', {}, 'Took'), h('dd', {}, `${((d.duration_ms || 0) / 1000).toFixed(1)} s`)));
    const old = this.pending.get(turnID || '');
    this.pending.delete(turnID || '');
    if (old && old.isConnected) old.replaceWith(el);
    else this.place(el, this.placeAfter);
  }

  problemCard(turnID, p) {
    if (p.kind !== 'too-long') {
      this.card('problem', h('strong', {}, 'The turn stopped'), h('p', {}, `${p.kind}: ${p.message}`)).setAttribute('role', 'alert');
      return;
    }
    const ns = p.next_step || {};
    let button = null;
    if (ns.action === 'switch-model') {
      button = h('button', { type: 'button', class: 'next-step', onclick: async () => {
        button.disabled = true;
        await this.switchModel(ns.model);
        const seq = this.userSeq.get(turnID);
        const m = seq && this.rendered.get(seq);
        if (m && !this.input.value) this.input.value = m.querySelector('.text')?.textContent || '';
        this.input.focus();
      } }, `Switch to ${ns.model}` + (ns.window ? ` (${fmtInt(ns.window)} tokens)` : ''));
    } else if (ns.action === 'new-chat') {
      button = h('button', { type: 'button', class: 'next-step', onclick: async () => {
        button.disabled = true;
        try {
          const c = await api('POST', '/v1/chats', { model: this.chat.model });
          state.draft = { id: c.id, text: ns.message || '' };
          location.hash = '#/chats/' + esc(c.id);
        } catch (e) { button.disabled = false; button.after(errorBox(e)); }
      } }, 'Start a new chat with this message');
    }
    const el = this.card('problem too-long', h('strong', {}, 'Too long for this model'), h('p', {}, p.message), button);
    if (this.placeAfter === undefined) el.setAttribute('role', 'alert'); // a replayed card is history, not news
  }

  async switchModel(model) {
    try {
      this.chat = await api('PATCH', `/v1/chats/${esc(this.id)}`, { model });
      this.showModel();
      announce(`This chat now uses ${model}.`);
      this.refreshContext();
    } catch (e) { this.note('problem', e.message); }
  }

  async submit() {
    const text = this.input.value;
    if (!text.trim()) return;
    const compact = /^\/compact(?:\s+([\s\S]*))?$/.exec(text.trim());
    this.input.value = '';
    if (compact) {
      await this.compact((compact[1] || '').trim());
      return;
    }
    try {
      const resp = await api('POST', `/v1/chats/${esc(this.id)}/messages`, { content: text }, { accept: 'text/event-stream', raw: true, signal: this.abort.signal });
      let done = false;
      let dropped = null;
      let refused = null;
      await readSSE(resp, (ev) => {
        done = done || ev.type === 'turn.completed';
        if (ev.type === 'stream.dropped') dropped = ev.data || {};
        else if (ev.type === 'error') refused = ev.data || {};
        else this.handle(ev, 'post');
      });
      // Refused while it waited behind another turn: nothing was stored.
      if (refused) throw new Error(refused.error || 'refused');
      // The stream broke (or was dropped for falling behind) before the
      // turn ended: the turn goes on in the daemon, so hand it to the watch
      // and read what was stored so far.
      if (!done) {
        for (const [turn, src] of this.owner) if (src === 'post') this.owner.set(turn, 'watch');
        await this.loadTranscript(dropped && dropped.last_seq);
      }
    } catch (e) {
      if (this.abort.signal.aborted) return;
      if (!this.input.value) this.input.value = text; // nothing was sent: keep the words
      this.note('problem', `Not sent: ${e.message}`);
      announce(`Not sent: ${e.message}`);
    }
  }

  async compact(focus) {
    const card = this.startedCard('compact', {});
    try {
      const c = await api('POST', `/v1/chats/${esc(this.id)}/compact`, focus ? { focus } : {}, { signal: this.abort.signal });
      this.pending.delete('compact');
      card.replaceWith(h('p', { class: 'note compacted', role: 'note' },
        `Summarised everything before message #${c.first_kept_seq}` + (focus ? `, keeping ${focus}.` : '.')));
      this.setSummary(c);
      this.refreshContext();
    } catch (e) {
      card.remove();
      this.note('problem', `Could not compact: ${e.message}`);
    }
  }

  async refreshContext() {
    let v;
    try {
      v = await api('GET', `/v1/chats/${esc(this.id)}/context`, undefined, { signal: this.abort.signal });
    } catch (e) {
      if (!this.abort.signal.aborted) this.context.replaceChildren(h('h2', { id: 'context-title' }, 'What the model is sent'), errorBox(e));
      return;
    }
    if (this.abort.signal.aborted) return;
    if (!this.summary || v.first_kept_seq >= (this.summary.first_kept_seq || 0)) {
      this.setSummary({ first_kept_seq: v.first_kept_seq, summary: v.summary, digest: v.digest, model: v.model });
    }
    this.context.replaceChildren(...contextView(v));
  }
}

// contextView renders a chat.ContextView: the window and how it is shared,
// the estimate against the transcript's budget, lean mode, loaded tools and
// the last requests as a small chart.
function contextView(v) {
  const b = v.budget || {};
  const over = v.estimate > b.transcript;
  const meter = h('meter', { id: 'estimate-meter', min: 0, max: Math.max(b.transcript || 1, 1), value: v.estimate || 0,
    low: Math.round((b.transcript || 1) * 0.5), high: Math.round((b.transcript || 1) * 0.9), optimum: 0 });
  const tools = v.loaded_tools || [];
  return [
    h('h2', { id: 'context-title' }, 'What the model is sent'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Model'), h('dd', {}, v.model),
      h('dt', {}, 'Window'), h('dd', {}, `${fmtInt(v.window)} tokens`, v.window_source ? h('span', { class: 'meta' }, ` (from ${v.window_source})`) : null),
      h('dt', {}, 'Lean'), h('dd', { id: 'lean' }, v.lean ? 'yes: short prompt, tools loaded on demand' : 'no'),
      h('dt', {}, 'Word for word from'), h('dd', {}, v.first_kept_seq > 1 ? `message #${v.first_kept_seq}` : 'the start'),
      h('dt', {}, 'Correction'), h('dd', {}, `× ${Number(v.factor || 1).toFixed(2)}`)),
    h('h3', {}, 'Transcript against its budget'),
    h('label', { for: 'estimate-meter', class: over ? 'over' : '' },
      `${fmtInt(v.estimate)} of ${fmtInt(b.transcript)} tokens` + (over ? ' (over: the next turn folds)' : '')),
    meter,
    h('h3', {}, 'How the window is shared'),
    budgetBar(b),
    h('h3', {}, 'Loaded tools'),
    tools.length ? h('ul', { class: 'tools', id: 'loaded-tools' }, tools.map((t) => h('li', {}, h('code', {}, t))))
      : h('p', { class: 'meta', id: 'loaded-tools' }, v.lean ? 'None yet: the model finds them with find_tools.' : 'Every tool is sent.'),
    h('h3', {}, 'Recent requests'),
    requestsChart(v.recent_requests || []),
  ];
}

const PARTS = [
  ['system', 'System prompt'], ['tools', 'Tools'], ['transcript', 'Transcript budget'], ['answer_room', 'Room for the answer'],
];

function budgetBar(b) {
  const win = Math.max(b.window || 0, 1);
  const svg = s('svg', { class: 'budget-bar', viewBox: '0 0 300 14', preserveAspectRatio: 'none', role: 'img', 'aria-labelledby': 'budget-title' },
    s('title', { id: 'budget-title' }, `Window of ${fmtInt(b.window)} tokens: ` + PARTS.map(([k, n]) => `${n} ${fmtInt(b[k])}`).join(', ')));
  let x = 0;
  for (const [k] of PARTS) {
    const w = ((b[k] || 0) / win) * 300;
    svg.append(s('rect', { x, y: 0, width: Math.max(w, 0), height: 14, class: 'part-' + k }));
    x += w;
  }
  const legend = h('ul', { class: 'legend' }, PARTS.map(([k, n]) => h('li', {}, h('span', { class: 'swatch part-' + k, 'aria-hidden': 'true' }), `${n}: ${fmtInt(b[k])}`)),
    h('li', {}, h('span', { class: 'swatch part-margin', 'aria-hidden': 'true' }), `Margin: ${fmtInt(Math.max(win - PARTS.reduce((a, [k]) => a + (b[k] || 0), 0), 0))}`));
  return h('div', {}, svg, legend);
}

// requestsChart draws each recent request's estimate (and the provider's
// own count, when it sent one) against its budget, oldest on the left.
function requestsChart(reqs) {
  if (!reqs.length) return h('p', { class: 'meta', id: 'requests-chart' }, 'No requests yet.');
  const W = 300, H = 110, pad = 4;
  const top = Math.max(...reqs.map((r) => Math.max(r.estimate, r.reported, r.budget)), 1);
  const bw = (W - pad * 2) / reqs.length;
  const y = (n) => H - 14 - ((H - 22) * n) / top;
  const svg = s('svg', { id: 'requests-chart', class: 'requests-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'requests-title' },
    s('title', { id: 'requests-title' }, `The last ${reqs.length} requests: ` +
      reqs.map((r, i) => `#${i + 1} ${r.kind || 'turn'} estimate ${fmtInt(r.estimate)}, reported ${fmtInt(r.reported)}, budget ${fmtInt(r.budget)}`).join('; ')));
  reqs.forEach((r, i) => {
    const x = pad + i * bw;
    const est = r.estimate || 0;
    svg.append(s('rect', { x: x + bw * 0.1, y: y(est), width: bw * 0.4, height: Math.max(y(0) - y(est), 0.5), class: 'bar-estimate' + (r.kind === 'heal' ? ' heal' : '') }));
    if (r.reported) svg.append(s('rect', { x: x + bw * 0.5, y: y(r.reported), width: bw * 0.4, height: Math.max(y(0) - y(r.reported), 0.5), class: 'bar-reported' }));
    if (r.budget) svg.append(s('line', { x1: x, x2: x + bw, y1: y(r.budget), y2: y(r.budget), class: 'budget-line' }));
  });
  svg.append(s('text', { x: pad, y: H - 2, class: 'axis' }, 'oldest'), s('text', { x: W - pad, y: H - 2, class: 'axis', 'text-anchor': 'end' }, 'newest'));
  const table = h('details', { class: 'as-table' }, h('summary', {}, 'As a table'),
    h('table', {}, h('thead', {}, h('tr', {}, ['Kind', 'Estimate', 'Reported', 'Budget'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, reqs.map((r) => h('tr', {}, h('td', {}, r.kind || 'turn'), h('td', {}, fmtInt(r.estimate)), h('td', {}, fmtInt(r.reported)), h('td', {}, fmtInt(r.budget)))))));
  const legend = h('ul', { class: 'legend' },
    h('li', {}, h('span', { class: 'swatch bar-estimate', 'aria-hidden': 'true' }), 'Estimate'),
    h('li', {}, h('span', { class: 'swatch bar-reported', 'aria-hidden': 'true' }), 'Reported by the provider'),
    h('li', {}, h('span', { class: 'swatch budget-line', 'aria-hidden': 'true' }), 'Budget'));
  return h('div', {}, svg, legend, table);
}

// ---------- memories ----------

const STATES = [['active', 'Active'], ['waiting', 'Waiting for OK'], ['undone', 'Undone']];

class MemoriesView {
  constructor(tab) {
    this.tab = STATES.some(([k]) => k === tab) ? tab : 'active';
    this.titles = new Map();
  }

  destroy() {}

  async mount(main) {
    this.panel = h('div', { role: 'tabpanel', id: 'memories-panel', 'aria-labelledby': 'tab-' + this.tab, tabindex: '0' });
    const tabs = h('div', { role: 'tablist', 'aria-label': 'Memories by state', class: 'tabs' });
    for (const [k, label] of STATES) {
      const on = k === this.tab;
      tabs.append(h('button', { type: 'button', role: 'tab', id: 'tab-' + k, 'aria-selected': String(on), 'aria-controls': 'memories-panel',
        tabindex: on ? '0' : '-1', onclick: () => { location.hash = '#/memories/' + k; } }, label));
    }
    tabs.addEventListener('keydown', (ev) => {
      const i = STATES.findIndex(([k]) => k === this.tab);
      const step = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
      if (!step) return;
      ev.preventDefault();
      const next = STATES[(i + step + STATES.length) % STATES.length][0];
      location.hash = '#/memories/' + next;
      state.focusTab = next;
    });
    this.runs = h('ul', { class: 'runs', id: 'runs', 'aria-label': 'Learning runs' });
    main.replaceChildren(h('h1', { tabindex: '-1' }, 'Memories'),
      h('p', { class: 'meta' }, 'What agentd learned about you, and from which chat. Waiting ones are used only after your OK.'),
      tabs, this.panel, h('h2', {}, 'Learning runs'), this.runs);
    if (state.focusTab) { document.getElementById('tab-' + state.focusTab)?.focus(); state.focusTab = null; }
    else main.querySelector('h1').focus();
    try {
      const chats = await allChats();
      for (const c of chats) this.titles.set(c.id, c.title || 'Untitled chat');
    } catch { /* titles are a nicety; ids still link */ }
    await this.load();
  }

  chatLink(id) {
    if (!id) return 'no chat';
    return h('a', { href: '#/chats/' + esc(id) }, this.titles.get(id) || id);
  }

  async load() {
    let mems, runs;
    try {
      [{ memories: mems }, { runs }] = await Promise.all([
        api('GET', '/v1/memories?state=' + esc(this.tab)), api('GET', '/v1/memory-runs')]);
    } catch (e) {
      const msg = e.status === 404 ? 'The memory API is not available on this daemon (GET /v1/memories answered 404).' : e.message;
      this.panel.replaceChildren(h('p', { class: 'error', role: 'alert', id: 'memories-error' }, msg));
      return;
    }
    const list = h('ul', { class: 'memories', id: 'memories' });
    if (!mems || !mems.length) list.append(h('li', { class: 'empty' }, 'Nothing here.'));
    for (const m of mems || []) list.append(this.memoryItem(m));
    this.panel.replaceChildren(list);
    this.runs.replaceChildren();
    if (!runs || !runs.length) this.runs.append(h('li', { class: 'empty' }, 'No runs yet.'));
    for (const r of (runs || []).slice().sort((a, b) => (a.at < b.at ? 1 : -1))) this.runs.append(this.runItem(r));
  }

  memoryItem(m) {
    const li = h('li', { class: 'memory state-' + m.state, 'data-id': m.id },
      h('p', { class: 'text' }, m.text),
      h('p', { class: 'meta' }, 'From ', this.chatLink(m.chat_id),
        m.from_seq ? ` (messages #${m.from_seq}–#${m.to_seq})` : '', ` · ${fmtTime(m.created_at)}`));
    if (m.state === 'waiting') {
      const ok = h('button', { type: 'button', class: 'approve', 'aria-label': `OK: keep “${m.text}”`, onclick: async () => {
        ok.disabled = true;
        try {
          await api('POST', `/v1/memories/${esc(m.id)}/approve`);
          li.replaceChildren(h('p', { class: 'text' }, m.text), h('p', { class: 'meta approved' }, 'Kept: it is active now.'));
          announce('Memory kept.');
        } catch (e) { ok.disabled = false; li.append(errorBox(e)); }
      } }, 'OK');
      li.append(ok);
    }
    return li;
  }

  runItem(r) {
    const n = (r.added || []).length;
    const li = h('li', { class: 'run' + (r.undone ? ' undone' : ''), 'data-id': r.id },
      h('p', {}, `${fmtTime(r.at)} · ${r.source} · learned ${n} ${n === 1 ? 'memory' : 'memories'} from `, this.chatLink(r.chat_id)));
    if (r.undone) {
      li.append(h('p', { class: 'meta' }, 'Undone.'));
    } else {
      const undo = h('button', { type: 'button', class: 'undo', 'aria-label': `Undo the run of ${fmtTime(r.at)}`, onclick: async () => {
        undo.disabled = true;
        try {
          await api('POST', `/v1/memory-runs/${esc(r.id)}/undo`);
          announce('Run undone.');
          await this.load();
        } catch (e) { undo.disabled = false; li.append(errorBox(e)); }
      } }, 'Undo');
      li.append(undo);
    }
    return li;
  }
}

// ---------- the command palette (⌘K / Ctrl-K) ----------

async function newChat() {
  const c = await api('POST', '/v1/chats', {});
  location.hash = '#/chats/' + esc(c.id);
}

// paletteCommands lists what the palette offers where the person is: in a
// chat, summarising its start and every other model; everywhere, a new
// chat, the memories and the chats.
async function paletteCommands() {
  const cmds = [];
  const v = state.view;
  if (v instanceof ChatView && v.chat) {
    cmds.push({ id: 'compact', label: 'Summarise the start of this chat', run: () => v.compact('') });
    let models = [];
    try { models = (await loadModels()).models || []; } catch { /* no models: no switch commands */ }
    for (const m of models) {
      if (m.id !== v.chat.model) {
        cmds.push({ id: 'model:' + m.id, label: `Switch model to ${m.id}`, hint: `${fmtInt(m.window)} tokens`, run: () => v.switchModel(m.id) });
      }
    }
  }
  cmds.push({ id: 'new-chat', label: 'New chat', run: newChat });
  cmds.push({ id: 'memories', label: 'Memories', run: () => { location.hash = '#/memories'; } });
  cmds.push({ id: 'chats', label: 'Chats', run: () => { location.hash = '#/'; } });
  return cmds;
}

const palette = { cmds: [], shown: [], at: 0, back: null };

async function openPalette() {
  const box = document.getElementById('palette');
  if (!box.hidden) return;
  palette.back = document.activeElement;
  palette.cmds = await paletteCommands();
  const input = document.getElementById('palette-input');
  input.value = '';
  box.hidden = false;
  input.focus();
  filterPalette();
}

function closePalette() {
  const box = document.getElementById('palette');
  if (box.hidden) return;
  box.hidden = true;
  if (palette.back?.isConnected) palette.back.focus();
}

// filterPalette shows the commands holding every word typed.
function filterPalette() {
  const words = document.getElementById('palette-input').value.toLowerCase().split(/\s+/).filter(Boolean);
  palette.shown = palette.cmds.filter((c) => words.every((w) => c.label.toLowerCase().includes(w)));
  palette.at = 0;
  drawPalette();
}

function drawPalette() {
  const list = document.getElementById('palette-list');
  const input = document.getElementById('palette-input');
  list.replaceChildren(...palette.shown.map((c, i) => h('li', {
    role: 'option', id: 'palette-opt-' + i, 'data-command': c.id, 'aria-selected': String(i === palette.at),
    onmousedown: (ev) => { ev.preventDefault(); runPalette(i); },
  }, c.label, c.hint ? h('span', { class: 'meta' }, ' · ' + c.hint) : null)));
  if (!palette.shown.length) list.append(h('li', { class: 'empty', role: 'presentation' }, 'No command matches.'));
  if (palette.shown.length) input.setAttribute('aria-activedescendant', 'palette-opt-' + palette.at);
  else input.removeAttribute('aria-activedescendant');
  document.getElementById('palette-opt-' + palette.at)?.scrollIntoView({ block: 'nearest' });
}

async function runPalette(i) {
  const c = palette.shown[i];
  if (!c) return;
  closePalette();
  try { await c.run(); } catch (e) { announce(`${c.label}: ${e.message}`); }
}

function paletteKey(ev) {
  const n = palette.shown.length;
  switch (ev.key) {
    case 'ArrowDown': palette.at = n ? (palette.at + 1) % n : 0; break;
    case 'ArrowUp': palette.at = n ? (palette.at - 1 + n) % n : 0; break;
    case 'Enter': runPalette(palette.at); break;
    case 'Escape': closePalette(); break;
    default: return;
  }
  ev.preventDefault();
  if (ev.key.startsWith('Arrow')) drawPalette();
}

// ---------- routing ----------

function route() {
  state.view?.destroy();
  const path = (location.hash.replace(/^#/, '') || '/').split('/').filter(Boolean).map(decodeURIComponent);
  let view;
  if (path[0] === 'chats' && path[1]) view = new ChatView(path[1]);
  else if (path[0] === 'memories') view = new MemoriesView(path[1]);
  else view = new ChatsView();
  document.title = 'agentd';
  for (const [id, on] of [['nav-chats', path[0] !== 'memories'], ['nav-memories', path[0] === 'memories']]) {
    const a = document.getElementById(id);
    if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  state.view = view;
  view.mount(document.getElementById('main'));
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('auth-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    saveToken(document.getElementById('token-input').value.trim());
  });
  document.getElementById('token-forget').addEventListener('click', () => {
    localStorage.removeItem(TOKEN_KEY);
    state.token = '';
    document.getElementById('token-input').value = '';
    announce('Token forgotten.');
  });
  document.getElementById('token-button').addEventListener('click', () => {
    const sec = document.getElementById('auth');
    sec.hidden = !sec.hidden;
    if (!sec.hidden) document.getElementById('token-input').focus();
  });
  document.addEventListener('keydown', (ev) => {
    if ((ev.metaKey || ev.ctrlKey) && !ev.altKey && ev.key.toLowerCase() === 'k') {
      ev.preventDefault();
      if (document.getElementById('palette').hidden) openPalette(); else closePalette();
    }
  });
  document.getElementById('palette-button').addEventListener('click', openPalette);
  document.getElementById('palette-input').addEventListener('input', filterPalette);
  document.getElementById('palette-input').addEventListener('keydown', paletteKey);
  document.getElementById('palette').addEventListener('mousedown', (ev) => { if (ev.target.id === 'palette') closePalette(); });
  window.addEventListener('hashchange', () => { closePalette(); route(); });
  route();
});
