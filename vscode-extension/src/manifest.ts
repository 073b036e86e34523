// A bundle's manifest.json → the manifest view's HTML. Pure: robust to missing optional fields, escapes
// everything, loads nothing remote (the Content Security Policy allows only the nonce'd style and the view's own
// script, bundled with the extension). The pictures (chip, memory, roofline) come from the server into the sections
// `pictures.ts` makes; runs of identical layer rows fold into one (`layerRuns.ts`).
import { escapeHtml } from './html';
import { runLabel, runsOf } from './layerRuns';
import { pictureSections } from './pictures';

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
  /** streamed-bundle/2: the programs bound to no layer, each weight with its checkpoint tensor. */
  shared?: { embed?: SharedProgram | null; head?: SharedProgram | null };
  tiles?: { embed?: ManifestTiles | null; head?: ManifestTiles | null };
  [k: string]: unknown;
}

export interface SharedWeight {
  name?: string;
  shape?: number[];
  reads?: Array<{ tensor?: string; encoding?: string; bytes?: number; chip?: number | null }>;
  checkpoint?: string;
  storage?: string;
}

export interface SharedProgram {
  weights?: SharedWeight[];
  states?: Array<{ name?: string; bytes?: number }>;
  tables?: Array<{ name?: string; shape?: number[]; bytes?: number; fill?: unknown[] | null }>;
}

export interface ManifestTiles {
  tiles?: number;
  row_tiles?: number;
  rows?: number;
  cols?: number | null;
  of_cols?: number | null;
  weights_on_chip?: boolean;
}

export interface ResidencyKind {
  kind?: string;
  layers?: number[];
  states?: string;
  weights?: string;
  state_bytes_per_layer?: number;
  weight_bytes_per_layer?: number;
}

export { escapeHtml };

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

interface LayerRow {
  layer: ManifestLayer;
  kind: string;
  residency: Array<{ label: string; tier: string; bytes?: number }>;
}

function residencyCell(res: LayerRow['residency'], withBytes = true): string {
  return res.length
    ? res.map((r) => `<span class="tier tier-${escapeHtml(r.tier)}" title="${escapeHtml(formatBytes(r.bytes))}">${escapeHtml(r.label)}: ${escapeHtml(r.tier)}${withBytes && typeof r.bytes === 'number' ? ` · ${escapeHtml(formatBytes(r.bytes))}` : ''}</span>`).join(' ')
    : '<span class="muted">—</span>';
}

function layerRowHtml(m: Manifest, row: LayerRow, hidden: boolean): string {
  const l = row.layer;
  const k = kindOfLayer(m, l);
  const isRep = k && k.representative === l.layer;
  const weights = layerWeights(l);
  const layerCell =
    typeof l.layer === 'number'
      ? `<a href="#" class="layer-link" data-layer="${l.layer}" title="Reveal ## Layer ${l.layer} in the document">Layer ${l.layer}</a>`
      : '—';
  return `<tr class="layer-row" data-layer="${escapeHtml(l.layer)}"${hidden ? ' hidden' : ''}><td class="layer">${layerCell}</td><td>${escapeHtml(row.kind)}${isRep ? ' <span class="badge">representative</span>' : ''}</td><td>${residencyCell(row.residency)}</td><td class="num"${weights.length ? ` title="${weights.map(escapeHtml).join('&#10;')}"` : ''}>${weights.length || '—'}</td></tr>`;
}

/**
 * The layer table's bodies: a layer whose row repeats no neighbour's is a row; a run of rows that repeat (the same
 * kind and residency, or a block of them: `Layers 0–63 · (gated deltanet ×3 · attention) ×16`) is one summary row
 * that folds out into its layers' rows (each still a `tr.layer-row`, hidden until the run is opened).
 */
export function layerTable(m: Manifest, layers: readonly ManifestLayer[]): string {
  const rows: LayerRow[] = layers.map((l) => {
    const k = kindOfLayer(m, l);
    return { layer: l, kind: k?.name ?? (l.kind !== undefined ? `kind ${l.kind}` : '—'), residency: layerResidency(m, l) };
  });
  const sig = (r: LayerRow) => JSON.stringify([r.kind, r.residency.map((x) => [x.label, x.tier, x.bytes ?? null])]);
  const out: string[] = [];
  for (const run of runsOf(rows.map(sig))) {
    const mine = rows.slice(run.start, run.start + run.period * run.repeats);
    if (mine.length === 1) {
      out.push(`<tbody>\n${layerRowHtml(m, mine[0], false)}\n</tbody>`);
      continue;
    }
    const first = mine[0].layer.layer;
    const last = mine[mine.length - 1].layer.layer;
    const label = runLabel(Number(first), Number(last), mine.slice(0, run.period).map((r) => r.kind), run.repeats);
    const seen = new Map<string, LayerRow['residency'][number]>();
    for (const r of mine.slice(0, run.period)) for (const x of r.residency) seen.set(`${x.label}:${x.tier}`, x);
    const link = typeof first === 'number'
      ? `<a href="#" class="layer-link" data-layer="${first}" title="Reveal ## Layer ${first} in the document">Layers ${first}–${escapeHtml(last)}</a>`
      : 'Layers';
    const summary = `<tr class="run-row" data-first="${escapeHtml(first)}"><td class="layer"><button type="button" class="run-toggle" aria-expanded="false" title="Show the ${mine.length} layers">▸</button> ${link}</td><td>${escapeHtml(label.replace(/^Layers [^·]*· /, ''))}</td><td>${residencyCell([...seen.values()], run.period === 1)}</td><td class="num muted">${mine.length} rows</td></tr>`;
    out.push(`<tbody class="run" aria-label="${escapeHtml(label)}">\n${summary}\n${mine.map((r) => layerRowHtml(m, r, true)).join('\n')}\n</tbody>`);
  }
  return out.join('\n');
}

/** A program bound to no layer (the embed, the head): its file, its estimate, its tiles, each weight with the
 *  checkpoint tensor it reads, and its tables. */
export function programSection(m: Manifest, which: 'embed' | 'head'): string {
  const title = which === 'embed' ? 'Embedding' : 'Head';
  const shared = m.shared && typeof m.shared === 'object' ? m.shared[which] : undefined;
  const file = m.programs?.[which];
  if (!shared && !file) {
    return which === 'embed' ? `<h2>${title}</h2>\n<p class="muted">none: a forward bundle starts from its input rows</p>` : '';
  }
  const est = (m.estimate?.programs as Record<string, any> | undefined)?.[which];
  const tiles = m.tiles?.[which];
  const facts: Array<[string, unknown]> = [
    ['program', file],
    ['time per step', typeof est?.seconds === 'number' ? formatSeconds(est.seconds) : undefined],
    ['FLOPs per step', typeof est?.flops === 'number' ? formatNumber(est.flops) : undefined],
    ['weights read per step', typeof est?.weight_bytes === 'number' ? formatBytes(est.weight_bytes) : undefined],
    ['tiles', tiles && typeof tiles.tiles === 'number' ? `${tiles.tiles} of ${tiles.rows} rows${tiles.cols ? ` × ${tiles.cols} of ${tiles.of_cols} columns` : ''}${tiles.weights_on_chip ? ', weights kept on chip' : ''}` : undefined],
  ];
  const factHtml = facts
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `<div class="fact"><span class="k">${escapeHtml(k)}</span><span class="v">${escapeHtml(v)}</span></div>`)
    .join('');
  const weights = Array.isArray(shared?.weights) ? shared!.weights! : [];
  const rows = weights
    .map((w) => {
      const reads = Array.isArray(w.reads) ? w.reads : [];
      const bytes = reads.filter((r) => r.chip === null || r.chip === undefined || r.chip === 0).reduce((a, r) => a + (typeof r.bytes === 'number' ? r.bytes : 0), 0);
      const shape = Array.isArray(w.shape) ? w.shape.join(' × ') : '—';
      const enc = [...new Set(reads.map((r) => r.encoding).filter(Boolean))].join(', ');
      return `<tr><td><code>${escapeHtml(w.name ?? '—')}</code></td><td><code>${escapeHtml(w.checkpoint ?? '—')}</code></td><td>${escapeHtml(w.storage ?? '—')}${enc ? ` <span class="muted">(read ${escapeHtml(enc)})</span>` : ''}</td><td class="num">${escapeHtml(shape)}</td><td class="num">${escapeHtml(formatBytes(bytes))}</td></tr>`;
    })
    .join('\n');
  const tables = (Array.isArray(shared?.tables) ? shared!.tables! : [])
    .map((t) => `<li><code>${escapeHtml(t.name ?? '—')}</code> ${escapeHtml(Array.isArray(t.shape) ? t.shape.join(' × ') : '')} · ${escapeHtml(formatBytes(t.bytes))}${Array.isArray(t.fill) ? ` · ${escapeHtml(t.fill.join(' '))}` : ''}</li>`)
    .join('');
  const id = which === 'embed' ? 'embedding' : 'head';
  return `<h2>${title}</h2>
<div class="facts">${factHtml || '<span class="muted">not recorded</span>'}</div>
<table id="${id}"><thead><tr><th>weight</th><th>checkpoint tensor</th><th>storage</th><th class="num">shape</th><th class="num">bytes per chip</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="5" class="muted">no weights</td></tr>'}
</tbody></table>${tables ? `\n<p class="muted">tables:</p><ul class="tables">${tables}</ul>` : ''}`;
}

export interface RenderOptions {
  cspSource: string;
  nonce: string;
  manifestPath?: string;
  /** Kept by the webview (`setState`) so that VS Code can restore the view after a reload. */
  state?: unknown;
  /** The view's script (`dist/webview.js` as a webview URI): links, folded runs, the pictures. */
  scriptUri?: string;
  /** What the picture sections say until the pictures arrive. */
  waiting?: string;
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
    `script-src 'nonce-${n}' ${opts.cspSource}`,
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

  const layerRows = layerTable(m, layers);

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
  td.layer { white-space: nowrap; }
  tr.run-row { cursor: pointer; }
  tr.run-row:hover { background: var(--vscode-list-hoverBackground); }
  .run-toggle { background: none; border: none; color: inherit; cursor: pointer; padding: 0 4px 0 0; font: inherit; }
  .run-toggle[aria-expanded="true"] { display: inline-block; transform: rotate(90deg); }
  .picture { overflow-x: auto; margin: 4px 0 8px; }
  .picture svg { max-width: none; }
  .picture .error { color: var(--vscode-errorForeground); }
  .chip-tabs { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 6px; }
  .chip-tab { font: inherit; color: var(--vscode-foreground); background: var(--vscode-button-secondaryBackground, transparent); border: 1px solid var(--vscode-editorWidget-border, rgba(128,128,128,.4)); border-radius: 3px; padding: 2px 10px; cursor: pointer; }
  .chip-tab[aria-selected="true"] { color: var(--vscode-button-foreground); background: var(--vscode-button-background); }
  .chip-pane g.region[data-line] { cursor: pointer; }
  .chip-pane g.region:hover rect { stroke: var(--vscode-focusBorder, #007fd4); stroke-width: 1; }
  .spills { margin: 0 0 8px; padding-left: 18px; }
  #chip-hover { visibility: hidden; position: fixed; z-index: 1000; max-width: 640px; padding: 6px 8px; white-space: pre-wrap; font-family: var(--vscode-editor-font-family); font-size: 12px; border-radius: 3px; pointer-events: none; color: var(--vscode-editorHoverWidget-foreground, var(--vscode-foreground)); background: var(--vscode-editorHoverWidget-background, var(--vscode-editor-background)); border: 1px solid var(--vscode-editorHoverWidget-border, rgba(128,128,128,.5)); }
  #chip-hover.visible { visibility: visible; }
  ul.tables { margin: 0; padding-left: 18px; }
  #vg-tooltip-element { visibility: hidden; position: fixed; z-index: 1000; padding: 6px 8px; font-size: 12px; border-radius: 3px; pointer-events: none; color: var(--vscode-editorHoverWidget-foreground, var(--vscode-foreground)); background: var(--vscode-editorHoverWidget-background, var(--vscode-editor-background)); border: 1px solid var(--vscode-editorHoverWidget-border, rgba(128,128,128,.5)); }
  #vg-tooltip-element.visible { visibility: visible; }
  #vg-tooltip-element table { width: auto; }
  #vg-tooltip-element td { border: none; padding: 1px 4px; }
  #vg-tooltip-element td.key { color: var(--vscode-descriptionForeground); }
</style>
</head>
<body>
<h1>Manifest — ${escapeHtml(title)}</h1>
<p class="muted">${escapeHtml(m.format ?? 'streamed-bundle')}${opts.manifestPath ? ` · <code>${escapeHtml(opts.manifestPath)}</code>` : ''}</p>
<h2>Deployment</h2>
<div class="facts" id="deployment">${deploymentHtml || '<span class="muted">not recorded</span>'}</div>
<h2>Estimate</h2>
<div class="facts" id="estimate">${estRows.join('') || '<span class="muted">no estimate</span>'}</div>
${pictureSections(opts.waiting)}
<h2>Kinds (${kinds.length})</h2>
<table id="kinds"><thead><tr><th class="num">#</th><th>kind</th><th class="num">layers</th><th>representative</th><th>carried state</th><th>program</th></tr></thead>
<tbody>
${kindRows}
</tbody></table>
${programSection(m, 'embed')}
<h2>Layers (${layers.length})</h2>
<table id="layers"><thead><tr><th>layer</th><th>kind</th><th>carried state residency</th><th class="num">weights</th></tr></thead>
${layerRows}
</table>
${programSection(m, 'head')}
<h2>Residency by tier</h2>
<table id="residency"><thead><tr><th>tier</th><th class="num">carried states</th><th class="num">state bytes</th><th class="num">weight bytes</th><th class="num">capacity</th></tr></thead>
<tbody>
${tierRows}
</tbody></table>
${reserved}
${opts.state !== undefined ? `<script nonce="${n}" type="application/json" id="view-state">${scriptLiteral(opts.state)}</script>\n` : ''}${opts.scriptUri ? `<script nonce="${n}" src="${escapeHtml(opts.scriptUri)}"></script>` : ''}
</body>
</html>`;
}
