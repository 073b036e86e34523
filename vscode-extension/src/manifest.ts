// A bundle's manifest.json → the manifest view's HTML. Pure: robust to missing optional fields, escapes
// everything, loads nothing remote (the Content Security Policy allows only the nonce'd inline style/script).

export interface ManifestKind {
  name?: string;
  representative?: number;
  layers?: number[];
  program?: string;
  carried?: string[];
  tp?: unknown;
}

export interface ManifestLayer {
  layer?: number;
  /** the kind's name, or its index in `kinds` */
  kind?: number | string;
  /** streamed-bundle/1: the kind program's names → this layer's */
  tensors?: Record<string, string>;
  /** streamed-bundle/2: this layer's weights, the checkpoint tensor and the storage of each (parallel lists) */
  weights?: string[];
  checkpoint?: (string | null)[];
  storage?: string[];
  states?: string[];
}

/** A layer's weights as `name ← checkpoint tensor (storage)`, for the layer table (streamed-bundle/2; /1 names no
 *  checkpoint tensor, so its rows list the kind program's names). */
export function layerWeights(l: ManifestLayer): string[] {
  if (Array.isArray(l.weights)) {
    return l.weights.map((w, i) => {
      const tensor = Array.isArray(l.checkpoint) ? l.checkpoint[i] : undefined;
      const storage = Array.isArray(l.storage) ? l.storage[i] : undefined;
      return `${w}${tensor ? ` ← ${tensor}` : ''}${storage ? ` (${storage})` : ''}`;
    });
  }
  return l.tensors && typeof l.tensors === 'object' ? Object.values(l.tensors).map(String) : [];
}

export interface ResidencyState {
  name?: string;
  layer?: number;
  tier?: string;
  bytes?: number;
}

export interface Manifest {
  format?: string;
  mode?: string;
  target?: string;
  ctx?: number;
  rows?: number;
  batch?: number;
  tp?: number;
  programs?: { embed?: string | null; head?: string | null };
  kinds?: ManifestKind[];
  layers?: ManifestLayer[];
  /**
   * Either per-tier totals with one entry per kind (streamed-bundle/1: `states`/`weights` as {tier: bytes},
   * `layers` as [{kind, layers, states: tier, weights: tier, state_bytes_per_layer, weight_bytes_per_layer}]),
   * or one entry per carried state (`states` as [{name, layer, tier, bytes}]).
   */
  residency?: {
    states?: ResidencyState[] | Record<string, number>;
    weights?: Record<string, number>;
    capacity?: Record<string, number>;
    layers?: ResidencyKind[];
    sram_reserved?: number;
    reserved_sram_bytes?: number;
    [k: string]: unknown;
  };
  estimate?: {
    tokens_per_second?: number | null;
    tokens_per_step?: number;
    step_seconds?: number;
    flops?: number;
    step?: { flops?: number; seconds?: number; bytes?: Record<string, number>; link_bytes?: number };
    bound?: string;
    [k: string]: unknown;
  };
  title?: string;
  source?: string;
  [k: string]: unknown;
}

export interface ResidencyKind {
  kind?: string;
  layers?: number[];
  states?: string;
  weights?: string;
  state_bytes_per_layer?: number;
  weight_bytes_per_layer?: number;
}

export function escapeHtml(v: unknown): string {
  return String(v ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

export function formatBytes(n: unknown): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[u]}`;
}

export function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '—';
  if (s >= 1) return `${s.toPrecision(4)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(4)} ms`;
  if (s >= 1e-6) return `${(s * 1e6).toPrecision(4)} µs`;
  return `${(s * 1e9).toPrecision(4)} ns`;
}

export function formatNumber(n: unknown): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) return n === undefined || n === null ? '—' : escapeHtml(n);
  if (n !== 0 && (Math.abs(n) >= 1e6 || Math.abs(n) < 1e-3)) return n.toExponential(3);
  return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toPrecision(4);
}

const TIERS = ['sram', 'hbm', 'ddr'];

export interface ResidencySummary {
  tier: string;
  states: number;
  bytes: number;
  weights?: number;
  capacity?: number;
}

function stateList(m: Manifest): ResidencyState[] {
  return Array.isArray(m.residency?.states) ? (m.residency!.states as ResidencyState[]) : [];
}

function tierMap(v: unknown): Record<string, number> {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return {};
  const out: Record<string, number> = {};
  for (const [k, n] of Object.entries(v)) if (typeof n === 'number') out[k] = n;
  return out;
}

/** Bytes of carried state (and of weights, and capacity, when known) by memory tier. */
export function residencyByTier(m: Manifest): ResidencySummary[] {
  const by = new Map<string, ResidencySummary>();
  for (const t of TIERS) by.set(t, { tier: t, states: 0, bytes: 0 });
  const get = (t: string) => {
    const e = by.get(t) ?? { tier: t, states: 0, bytes: 0 };
    by.set(t, e);
    return e;
  };
  for (const s of stateList(m)) {
    const e = get(typeof s.tier === 'string' ? s.tier : 'unknown');
    e.states++;
    e.bytes += typeof s.bytes === 'number' ? s.bytes : 0;
  }
  const r = m.residency ?? {};
  for (const [t, n] of Object.entries(tierMap(r.states))) get(t).bytes += n;
  for (const k of Array.isArray(r.layers) ? r.layers : []) {
    if (typeof k?.states === 'string') get(k.states).states += Array.isArray(k.layers) ? k.layers.length * Math.max(1, carriedCount(m, k.kind)) : 0;
  }
  for (const [t, n] of Object.entries(tierMap(r.weights))) get(t).weights = (get(t).weights ?? 0) + n;
  for (const [t, n] of Object.entries(tierMap(r.capacity))) get(t).capacity = n;
  return [...by.values()];
}

function carriedCount(m: Manifest, kindName: string | undefined): number {
  const k = (Array.isArray(m.kinds) ? m.kinds : []).find((x) => x.name === kindName);
  return Array.isArray(k?.carried) ? k!.carried!.length : 0;
}

/** The kind of a manifest layer: by index or by name. */
export function kindOfLayer(m: Manifest, l: ManifestLayer): ManifestKind | undefined {
  const kinds = Array.isArray(m.kinds) ? m.kinds : [];
  if (typeof l.kind === 'number') return kinds[l.kind];
  if (typeof l.kind === 'string') return kinds.find((k) => k.name === l.kind) ?? { name: l.kind };
  if (typeof l.layer === 'number') return kinds.find((k) => Array.isArray(k.layers) && k.layers.includes(l.layer!));
  return undefined;
}

/** Where a layer's carried state (and weights) live: one entry per state, or per tier for its kind. */
export function layerResidency(m: Manifest, l: ManifestLayer): Array<{ label: string; tier: string; bytes?: number }> {
  if (typeof l.layer !== 'number') return [];
  const own = stateList(m).filter((s) => s.layer === l.layer);
  if (own.length) return own.map((s) => ({ label: String(s.name ?? 'state'), tier: String(s.tier ?? '?'), bytes: s.bytes }));
  const perKind = (Array.isArray(m.residency?.layers) ? m.residency!.layers! : []).find(
    (k) => Array.isArray(k.layers) && k.layers.includes(l.layer!),
  );
  if (!perKind) return [];
  const out: Array<{ label: string; tier: string; bytes?: number }> = [];
  if (perKind.states) out.push({ label: 'states', tier: perKind.states, bytes: perKind.state_bytes_per_layer });
  if (perKind.weights) out.push({ label: 'weights', tier: perKind.weights, bytes: perKind.weight_bytes_per_layer });
  return out;
}

export interface RenderOptions {
  cspSource: string;
  nonce: string;
  manifestPath?: string;
  /** Kept by the webview (`setState`) so that VS Code can restore the view after a reload. */
  state?: unknown;
}

/** A value as a JavaScript literal inside a `<script>`: JSON with `<` escaped, so no text can close the script. */
export function scriptLiteral(v: unknown): string {
  return JSON.stringify(v ?? null).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

export function renderManifestHtml(m: Manifest, opts: RenderOptions): string {
  const kinds = Array.isArray(m.kinds) ? m.kinds : [];
  const layers = Array.isArray(m.layers) ? m.layers : [];
  const est: NonNullable<Manifest['estimate']> = m.estimate && typeof m.estimate === 'object' ? m.estimate : {};
  const stepSeconds = typeof est.step_seconds === 'number' ? est.step_seconds : typeof est.step?.seconds === 'number' ? est.step.seconds : undefined;
  const n = escapeHtml(opts.nonce);
  const csp = [
    `default-src 'none'`,
    `img-src ${opts.cspSource} data:`,
    `style-src ${opts.cspSource} 'nonce-${n}'`,
    `script-src 'nonce-${n}'`,
    `font-src ${opts.cspSource}`,
  ].join('; ');

  const deployment: Array<[string, unknown]> = [
    ['target', m.target],
    ['mode', m.mode],
    ['ctx', m.ctx],
    ['rows', m.rows],
    ['batch', m.batch],
    ['tp', m.tp],
  ];
  const deploymentHtml = deployment
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `<div class="fact"><span class="k">${escapeHtml(k)}</span><span class="v">${escapeHtml(v)}</span></div>`)
    .join('');

  const knownEst: Array<[string, string, unknown]> = [
    ['tokens_per_second', 'tokens / s', est.tokens_per_second],
    ['tokens_per_step', 'tokens / step', est.tokens_per_step],
    ['step_seconds', 'step', stepSeconds !== undefined ? formatSeconds(stepSeconds) : undefined],
    ['flops', 'FLOPs / step', typeof est.flops === 'number' ? est.flops : est.step?.flops],
    ['bound', 'bound', est.bound],
  ];
  const estRows = knownEst
    .filter(([, , v]) => v !== undefined && v !== null)
    .map(([, label, v]) => `<div class="fact"><span class="k">${escapeHtml(label)}</span><span class="v">${typeof v === 'number' ? formatNumber(v) : escapeHtml(v)}</span></div>`);
  for (const [k, v] of Object.entries(est)) {
    if (knownEst.some(([key]) => key === k) || k === 'target') continue;
    if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') {
      estRows.push(`<div class="fact"><span class="k">${escapeHtml(k.replace(/_/g, ' '))}</span><span class="v">${typeof v === 'number' ? formatNumber(v) : escapeHtml(v)}</span></div>`);
    }
  }

  const layerRows = layers
    .map((l) => {
      const k = kindOfLayer(m, l);
      const kindName = k?.name ?? (l.kind !== undefined ? `kind ${l.kind}` : '—');
      const isRep = k && k.representative === l.layer;
      const res = layerResidency(m, l);
      const resid = res.length
        ? res.map((r) => `<span class="tier tier-${escapeHtml(r.tier)}" title="${escapeHtml(formatBytes(r.bytes))}">${escapeHtml(r.label)}: ${escapeHtml(r.tier)}${typeof r.bytes === 'number' ? ` · ${escapeHtml(formatBytes(r.bytes))}` : ''}</span>`).join(' ')
        : '<span class="muted">—</span>';
      const weights = layerWeights(l);
      const layerCell =
        typeof l.layer === 'number'
          ? `<a href="#" class="layer-link" data-layer="${l.layer}" title="Reveal ## Layer ${l.layer} in the document">Layer ${l.layer}</a>`
          : '—';
      return `<tr class="layer-row" data-layer="${escapeHtml(l.layer)}"><td>${layerCell}</td><td>${escapeHtml(kindName)}${isRep ? ' <span class="badge">representative</span>' : ''}</td><td>${resid}</td><td class="num"${weights.length ? ` title="${weights.map(escapeHtml).join('&#10;')}"` : ''}>${weights.length || '—'}</td></tr>`;
    })
    .join('\n');

  const kindRows = kinds
    .map((k, i) => {
      const carried = Array.isArray(k.carried) && k.carried.length ? k.carried.map(escapeHtml).join(', ') : '<span class="muted">none</span>';
      const count = Array.isArray(k.layers) ? k.layers.length : 0;
      const rep = typeof k.representative === 'number'
        ? `<a href="#" class="layer-link" data-layer="${k.representative}">layer ${k.representative}</a>`
        : '—';
      return `<tr class="kind-row"><td class="num">${i}</td><td>${escapeHtml(k.name ?? `kind ${i}`)}</td><td class="num">${count}</td><td>${rep}</td><td>${carried}</td><td><code>${escapeHtml(k.program ?? '—')}</code></td></tr>`;
    })
    .join('\n');

  const tierRows = residencyByTier(m)
    .map((t) => `<tr><td><span class="tier tier-${escapeHtml(t.tier)}">${escapeHtml(t.tier)}</span></td><td class="num">${t.states}</td><td class="num">${escapeHtml(formatBytes(t.bytes))}</td><td class="num">${t.weights !== undefined ? escapeHtml(formatBytes(t.weights)) : '—'}</td><td class="num">${t.capacity !== undefined ? escapeHtml(formatBytes(t.capacity)) : '—'}</td></tr>`)
    .join('\n');
  const reservedBytes = typeof m.residency?.reserved_sram_bytes === 'number' ? m.residency.reserved_sram_bytes : m.residency?.sram_reserved;
  const reserved = typeof reservedBytes === 'number'
    ? `<p class="muted">SRAM reserved for programs: ${escapeHtml(formatBytes(reservedBytes))}</p>`
    : '';

  const title = m.title ?? (m.source ? m.source.split(/[\\/]/).pop() : 'bundle');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Manifest — ${escapeHtml(title)}</title>
<style nonce="${n}">
  body { color: var(--vscode-foreground); background: var(--vscode-editor-background); font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); padding: 0 16px 24px; }
  h1 { font-size: 1.4em; font-weight: 600; margin: 16px 0 4px; }
  h2 { font-size: 1.1em; font-weight: 600; margin: 20px 0 6px; border-bottom: 1px solid var(--vscode-panel-border, var(--vscode-widget-border, transparent)); padding-bottom: 4px; }
  .facts { display: flex; flex-wrap: wrap; gap: 8px 20px; }
  .fact .k { color: var(--vscode-descriptionForeground); margin-right: 6px; }
  .fact .v { font-weight: 600; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--vscode-editorWidget-border, rgba(128,128,128,.2)); vertical-align: top; }
  th { color: var(--vscode-descriptionForeground); font-weight: 600; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  tr.layer-row:hover, tr.kind-row:hover { background: var(--vscode-list-hoverBackground); }
  a { color: var(--vscode-textLink-foreground); text-decoration: none; }
  a:hover { color: var(--vscode-textLink-activeForeground); text-decoration: underline; }
  .muted { color: var(--vscode-descriptionForeground); }
  .badge { font-size: .85em; padding: 0 5px; border-radius: 8px; background: var(--vscode-badge-background); color: var(--vscode-badge-foreground); }
  .tier { font-family: var(--vscode-editor-font-family); font-size: .9em; padding: 0 4px; border-radius: 3px; border: 1px solid var(--vscode-editorWidget-border, rgba(128,128,128,.4)); white-space: nowrap; }
  .tier-sram { border-color: var(--vscode-charts-green, green); }
  .tier-hbm { border-color: var(--vscode-charts-blue, blue); }
  .tier-ddr { border-color: var(--vscode-charts-orange, orange); }
  code { font-family: var(--vscode-editor-font-family); }
</style>
</head>
<body>
<h1>Manifest — ${escapeHtml(title)}</h1>
<p class="muted">${escapeHtml(m.format ?? 'streamed-bundle')}${opts.manifestPath ? ` · <code>${escapeHtml(opts.manifestPath)}</code>` : ''}</p>
<h2>Deployment</h2>
<div class="facts" id="deployment">${deploymentHtml || '<span class="muted">not recorded</span>'}</div>
<h2>Estimate</h2>
<div class="facts" id="estimate">${estRows.join('') || '<span class="muted">no estimate</span>'}</div>
<h2>Kinds (${kinds.length})</h2>
<table id="kinds"><thead><tr><th class="num">#</th><th>kind</th><th class="num">layers</th><th>representative</th><th>carried state</th><th>program</th></tr></thead>
<tbody>
${kindRows}
</tbody></table>
<h2>Layers (${layers.length})</h2>
<table id="layers"><thead><tr><th>layer</th><th>kind</th><th>carried state residency</th><th class="num">weights</th></tr></thead>
<tbody>
${layerRows}
</tbody></table>
<h2>Residency by tier</h2>
<table id="residency"><thead><tr><th>tier</th><th class="num">carried states</th><th class="num">state bytes</th><th class="num">weight bytes</th><th class="num">capacity</th></tr></thead>
<tbody>
${tierRows}
</tbody></table>
${reserved}
<script nonce="${n}">
  const vscode = acquireVsCodeApi();
  ${opts.state !== undefined ? `vscode.setState(${scriptLiteral(opts.state)});` : ''}
  document.addEventListener('click', (e) => {
    const a = e.target.closest && e.target.closest('.layer-link');
    if (!a) return;
    e.preventDefault();
    vscode.postMessage({ type: 'reveal', layer: Number(a.dataset.layer) });
  });
</script>
</body>
</html>`;
}
