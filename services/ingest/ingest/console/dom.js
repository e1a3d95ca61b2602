// Building DOM without markup: every value is set as text or as an
// attribute, never parsed as HTML.

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  return fill(el, props, children);
}

const SVG = 'http://www.w3.org/2000/svg';

export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG, tag);
  return fill(el, props, children);
}

function fill(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'style') {
      // Through the CSSOM: the console's policy allows no inline style.
      for (const decl of String(v).split(';')) {
        const i = decl.indexOf(':');
        if (i > 0) el.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
      }
    }
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function replace(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

export function fmtTime(t) {
  if (!t) return '-';
  return new Date(t).toISOString().replace('.000Z', 'Z');
}

export function fmtDuration(seconds) {
  if (seconds === undefined || seconds === null) return '-';
  let v = Math.round(seconds);
  const neg = v < 0; v = Math.abs(v);
  const d = Math.floor(v / 86400), hr = Math.floor((v % 86400) / 3600), m = Math.floor((v % 3600) / 60), sec = v % 60;
  const parts = [];
  if (d) parts.push(d + 'd');
  if (hr) parts.push(hr + 'h');
  if (m) parts.push(m + 'm');
  if (sec || parts.length === 0) parts.push(sec + 's');
  return (neg ? '-' : '') + parts.slice(0, 2).join(' ');
}
