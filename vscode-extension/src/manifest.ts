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
  kind?: number;
  tensors?: Record<string, string>;
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
  residency?: { states?: ResidencyState[]; sram_reserved?: number; [k: string]: unknown };
  estimate?: { tokens_per_second?: number; step_seconds?: number; flops?: number; [k: string]: unknown };
  source?: string;
  [k: string]: unknown;
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
}

export function residencyByTier(m: Manifest): ResidencySummary[] {
  const states = Array.isArray(m.residency?.states) ? m.residency!.states! : [];
  const by = new Map<string, ResidencySummary>();
  for (const t of TIERS) by.set(t, { tier: t, states: 0, bytes: 0 });
  for (const s of states) {
    const t = typeof s.tier === 'string' ? s.tier : 'unknown';
    const e = by.get(t) ?? { tier: t, states: 0, bytes: 0 };
    e.states++;
    e.bytes += typeof s.bytes === 'number' ? s.bytes : 0;
    by.set(t, e);
  }
  return [...by.values()].filter((e) => e.states > 0 || TIERS.includes(e.tier));
}

export interface RenderOptions {
  cspSource: string;
  nonce: string;
  manifestPath?: string;
}

export function renderManifestHtml(m: Manifest, opts: RenderOptions): string {
  const kinds = Array.isArray(m.kinds) ? m.kinds : [];
  const layers = Array.isArray(m.layers) ? m.layers : [];
  const states = Array.isArray(m.residency?.states) ? m.residency!.states! : [];
  const est = m.estimate && typeof m.estimate === 'object' ? m.estimate : {};
  const n = escapeHtml(opts.nonce);
  const csp = [
    `default-src 'none'`,
    `img-src ${opts.cspSource} data:`,
    `style-src ${opts.cspSource} 'nonce-${n}'`,
    `script-src 'nonce-${n}'`,
    `font-src ${opts.cspSource}`,
  ].join('; ');

  const statesByLayer = new Map<number, ResidencyState[]>();
  for (const s of states) {
    if (typeof s.layer === 'number') {
      const a = statesByLayer.get(s.layer) ?? [];
      a.push(s);
      statesByLayer.set(s.layer, a);
    }
  }

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
    ['step_seconds', 'step', typeof est.step_seconds === 'number' ? `${formatNumber(est.step_seconds * 1e3)} ms` : undefined],
    ['flops', 'FLOPs / step', est.flops],
  ];
  const estRows = knownEst
    .filter(([, , v]) => v !== undefined && v !== null)
    .map(([, label, v]) => `<div class="fact"><span class="k">${escapeHtml(label)}</span><span class="v">${typeof v === 'number' ? formatNumber(v) : escapeHtml(v)}</span></div>`);
  for (const [k, v] of Object.entries(est)) {
    if (knownEst.some(([key]) => key === k)) continue;
    if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') {
      estRows.push(`<div class="fact"><span class="k">${escapeHtml(k.replace(/_/g, ' '))}</span><span class="v">${typeof v === 'number' ? formatNumber(v) : escapeHtml(v)}</span></div>`);
    }
  }

  const layerRows = layers
    .map((l) => {
      const k = typeof l.kind === 'number' ? kinds[l.kind] : undefined;
      const kindName = k?.name ?? (l.kind !== undefined ? `kind ${l.kind}` : '—');
      const isRep = k && k.representative === l.layer;
      const st = typeof l.layer === 'number' ? statesByLayer.get(l.layer) ?? [] : [];
      const resid = st.length
        ? st.map((s) => `<span class="tier tier-${escapeHtml(s.tier)}" title="${escapeHtml(formatBytes(s.bytes))}">${escapeHtml(s.name)}: ${escapeHtml(s.tier ?? '?')}</span>`).join(' ')
        : '<span class="muted">—</span>';
      const tensors = l.tensors && typeof l.tensors === 'object' ? Object.keys(l.tensors).length : 0;
      const layerCell =
        typeof l.layer === 'number'
          ? `<a href="#" class="layer-link" data-layer="${l.layer}" title="Reveal ## Layer ${l.layer} in the document">Layer ${l.layer}</a>`
          : '—';
      return `<tr class="layer-row" data-layer="${escapeHtml(l.layer)}"><td>${layerCell}</td><td>${escapeHtml(kindName)}${isRep ? ' <span class="badge">representative</span>' : ''}</td><td>${resid}</td><td class="num">${tensors || '—'}</td></tr>`;
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
    .map((t) => `<tr><td><span class="tier tier-${escapeHtml(t.tier)}">${escapeHtml(t.tier)}</span></td><td class="num">${t.states}</td><td class="num">${escapeHtml(formatBytes(t.bytes))}</td></tr>`)
    .join('\n');
  const reserved = typeof m.residency?.sram_reserved === 'number'
    ? `<p class="muted">SRAM reserved: ${escapeHtml(formatBytes(m.residency.sram_reserved))}</p>`
    : '';

  const title = m.source ? m.source.split(/[\\/]/).pop() : 'bundle';
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
<table id="layers"><thead><tr><th>layer</th><th>kind</th><th>carried state residency</th><th class="num">tensors</th></tr></thead>
<tbody>
${layerRows}
</tbody></table>
<h2>Residency by tier</h2>
<table id="residency"><thead><tr><th>tier</th><th class="num">states</th><th class="num">bytes</th></tr></thead>
<tbody>
${tierRows}
</tbody></table>
${reserved}
<script nonce="${n}">
  const vscode = acquireVsCodeApi();
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
