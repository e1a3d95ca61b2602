// Kubernetes quantities in the core's units: milli-units for cpu, whole
// units otherwise (as /v1/clusterqueues reports usage).

const SUFFIX = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

export function parseQuantity(q) {
  if (typeof q === 'number') return q;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$/.exec(String(q ?? '').trim());
  if (!m) return NaN;
  return Number(m[1]) * SUFFIX[m[2]];
}

// coreValue is a quantity in the core's units for a resource.
export function coreValue(resource, q) {
  const v = parseQuantity(q);
  return resource === 'cpu' ? Math.round(v * 1000) : Math.ceil(v);
}

// display renders a core value for people.
export function display(resource, v) {
  if (resource === 'cpu') return String(Math.round(v) / 1000);
  if (/memory|storage/.test(resource) && v >= 2 ** 20) {
    for (const [s, f] of [['Ti', 2 ** 40], ['Gi', 2 ** 30], ['Mi', 2 ** 20]]) {
      if (v >= f) return (Math.round((v / f) * 10) / 10) + s;
    }
  }
  return String(v);
}
