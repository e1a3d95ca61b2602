// Every call goes to the API with the user's bearer token, if given: the
// console has no access of its own.

const TOKEN = 'jetqueue.token';

export function token() { return sessionStorage.getItem(TOKEN) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN, t); else sessionStorage.removeItem(TOKEN);
}

function headers(extra) {
  const hd = Object.assign({ Accept: 'application/json' }, extra || {});
  const t = token();
  if (t) hd.Authorization = 'Bearer ' + t;
  return hd;
}

export class APIError extends Error {
  constructor(status, body) {
    const e = body && body.errors && body.errors[0];
    const msg = e ? [e.object, e.field, e.message].filter(Boolean).join(': ') : 'HTTP ' + status;
    super(msg);
    this.status = status;
  }
}

export async function get(path, params) {
  return call('GET', path, params);
}

export async function call(method, path, params, body, contentType) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const url = path + (q.toString() ? '?' + q : '');
  const init = { method, headers: headers(contentType ? { 'Content-Type': contentType } : {}) };
  if (body !== undefined) init.body = body;
  const resp = await fetch(url, init);
  let data = null;
  try { data = await resp.json(); } catch (_) { /* empty */ }
  if (!resp.ok) throw new APIError(resp.status, data);
  return data;
}

// watch reads GET /v1/watch/workloads (text/event-stream) with fetch, so
// that it carries the same Authorization header as every other call, and
// calls onEvent for each event; it reconnects after the last seq seen.
export function watch(onEvent, onState) {
  let since = 0, stopped = false, ctrl = null, delay = 1000;
  async function run() {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const q = since ? '?since=' + since : '';
        const resp = await fetch('/v1/watch/workloads' + q, { headers: headers({ Accept: 'text/event-stream' }), signal: ctrl.signal });
        if (!resp.ok) throw new Error('HTTP ' + resp.status);
        onState(true);
        delay = 1000;
        const reader = resp.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            let type = 'message', data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('event: ')) type = line.slice(7);
              else if (line.startsWith('data: ')) data += line.slice(6);
            }
            if (!data) continue;
            try {
              const ev = JSON.parse(data);
              if (ev.seq > since) since = ev.seq;
              onEvent(type, ev);
            } catch (_) { /* not ours */ }
          }
        }
      } catch (_) { /* reconnect */ }
      onState(false);
      if (stopped) return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }
  run();
  return () => { stopped = true; if (ctrl) ctrl.abort(); };
}
