import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapeHtml, formatBytes, kindOfLayer, layerWeights, renderManifestHtml, residencyByTier, Manifest } from '../src/manifest';

const full: Manifest = {
  format: 'streamed-bundle/1',
  mode: 'decode',
  target: 'sn50',
  ctx: 4096,
  rows: 1,
  batch: 1,
  tp: 1,
  programs: { embed: 'embed.json', head: 'head.json' },
  kinds: [
    { name: 'attention, window 32', representative: 0, layers: [0, 1, 3], program: 'kind0.json', carried: ['Kc0', 'Vc0'] },
    { name: 'attention', representative: 2, layers: [2], program: 'kind1.json', carried: ['Kc2', 'Vc2'] },
  ],
  layers: [
    { layer: 0, kind: 0, tensors: { Wq0: 'Wq0' } },
    { layer: 1, kind: 0, tensors: { Wq0: 'Wq1' } },
    { layer: 2, kind: 1, tensors: { Wq2: 'Wq2' } },
    { layer: 3, kind: 0, tensors: { Wq0: 'Wq3' } },
  ],
  residency: {
    states: [
      { name: 'Kc0', layer: 0, tier: 'sram', bytes: 2048 },
      { name: 'Vc0', layer: 0, tier: 'sram', bytes: 2048 },
      { name: 'Kc2', layer: 2, tier: 'hbm', bytes: 1048576 },
    ],
    sram_reserved: 4096,
  },
  estimate: { tokens_per_second: 1234.5, step_seconds: 0.00081, flops: 2.5e9, bound: 'memory' },
  source: '/ws/tiny.lgm',
};

const opts = { cspSource: 'vscode-webview://x', nonce: 'N0NCE' };

test('manifest → HTML: one row per layer with its kind, links back to the document', () => {
  const html = renderManifestHtml(full, opts);
  const rows = html.match(/<tr class="layer-row"/g) ?? [];
  assert.equal(rows.length, 4);
  assert.match(html, /data-layer="2"[^>]*>Layer 2<\/a><\/td><td>attention <span class="badge">representative<\/span>/);
  assert.match(html, /Layer 1<\/a><\/td><td>attention, window 32<\/td>/);
  assert.match(html, /Layers \(4\)/);
  assert.match(html, /Kinds \(2\)/);
});

test('manifest → HTML: deployment, estimate and residency by tier', () => {
  const html = renderManifestHtml(full, opts);
  assert.match(html, /<span class="k">mode<\/span><span class="v">decode<\/span>/);
  assert.match(html, /<span class="k">ctx<\/span><span class="v">4096<\/span>/);
  assert.match(html, /tokens \/ s<\/span><span class="v">1235<\/span>/);
  assert.match(html, /step<\/span><span class="v">810\.0 µs/);
  assert.match(html, /bound<\/span><span class="v">memory/);
  assert.match(html, /Kc0: sram/);
  assert.match(html, /tier-hbm">hbm<\/span><\/td><td class="num">1<\/td><td class="num">1\.00 MiB/);
  assert.match(html, /SRAM reserved for programs: 4\.00 KiB/);
});

test('manifest → HTML: a strict Content Security Policy, no remote resources', () => {
  const html = renderManifestHtml(full, opts);
  const csp = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html)![1];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'nonce-N0NCE'/);
  assert.doesNotMatch(html, /https?:\/\//);
  for (const tag of html.match(/<(script|style)[^>]*>/g)!) assert.match(tag, /nonce="N0NCE"/);
  assert.match(html, /var\(--vscode-foreground\)/);
});

test('manifest → HTML: robust to a minimal manifest', () => {
  const html = renderManifestHtml({}, opts);
  assert.match(html, /Layers \(0\)/);
  assert.match(html, /no estimate/);
  const html2 = renderManifestHtml({ layers: [{ layer: 5 }, { kind: 9 }], kinds: [{}], estimate: null as any, residency: { states: null as any } }, opts);
  assert.equal((html2.match(/<tr class="layer-row"/g) ?? []).length, 2);
  assert.match(html2, /kind 9/);
});

test('manifest → HTML: names are escaped', () => {
  const html = renderManifestHtml({ kinds: [{ name: '<img src=x onerror=alert(1)>', layers: [0], representative: 0 }], layers: [{ layer: 0, kind: 0 }] }, opts);
  assert.doesNotMatch(html, /<img/);
  assert.match(html, /&lt;img src=x/);
  assert.equal(escapeHtml(`"'&`), '&quot;&#39;&amp;');
});

test('residency by tier and byte formatting', () => {
  assert.deepEqual(residencyByTier(full), [
    { tier: 'sram', states: 2, bytes: 4096 },
    { tier: 'hbm', states: 1, bytes: 1048576 },
    { tier: 'ddr', states: 0, bytes: 0 },
  ]);
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(1536), '1.50 KiB');
  assert.equal(formatBytes(undefined), '—');
});

test('manifest → HTML: a manifest written by `streamed lower` (kinds by name, residency per kind and tier)', async () => {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const m: Manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'test', 'fixtures', 'manifest-streamed-bundle-1.json'), 'utf8'));
  const html = renderManifestHtml(m, opts);
  assert.equal((html.match(/<tr class="layer-row"/g) ?? []).length, m.layers!.length);
  assert.match(html, /Layer 0<\/a><\/td><td>attention, window 32 <span class="badge">representative<\/span>/);
  assert.match(html, /Layer 2<\/a><\/td><td>attention <span class="badge">representative<\/span>/);
  assert.match(html, /Layer 5<\/a><\/td><td>attention<\/td>/);
  assert.match(html, /states: sram · 512 KiB/);
  assert.match(html, /weights: hbm · 38\.5 KiB/);
  assert.match(html, /<h1>Manifest — Tiny windowed model<\/h1>/);
  assert.match(html, /tokens \/ s<\/span><span class="v">3\.706e\+6/);
  assert.match(html, /step<\/span><span class="v">269\.8 ns/);
  assert.match(html, /bound<\/span><span class="v">memory/);
  assert.match(html, /SRAM reserved for programs: 130 KiB/);
  const tiers = residencyByTier(m);
  assert.deepEqual(tiers.find((t) => t.tier === 'sram'), { tier: 'sram', states: 12, bytes: 3145728, capacity: 432000000 });
  assert.equal(tiers.find((t) => t.tier === 'hbm')!.weights, 286848);
});

test('manifest → HTML: streamed-bundle/2 (a real `streamed lower` of small-gemma3) lists each layer\'s weights with their checkpoint tensors', async () => {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const m: Manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'test', 'fixtures', 'manifest-streamed-bundle-2.json'), 'utf8'));
  assert.equal(m.format, 'streamed-bundle/2');
  const html = renderManifestHtml(m, opts);
  assert.equal((html.match(/<tr class="layer-row"/g) ?? []).length, 12);
  const l5 = m.layers![5];
  const weights = layerWeights(l5);
  assert.equal(weights.length, l5.weights!.length);
  assert.ok(weights.length > 0);
  // Layer 5's own tensors, never layer 0's (the bug a runtime would load).
  assert.ok(weights.every((w) => !/\.0\./.test(w)), weights.join(', '));
  assert.ok(weights.includes('Wq5 ← model.layers.5.self_attn.q_proj.weight (Q8_0)'), weights.join(', '));
  const row = html.split('\n').find((r) => r.startsWith('<tr class="layer-row" data-layer="5"'))!;
  assert.match(row, new RegExp(`<td class="num" title="[^"]*model\\.layers\\.5\\.self_attn\\.q_proj\\.weight[^"]*">${weights.length}</td></tr>$`));
});

test('the kind of a layer: by index, by name, or from the kinds\' layer lists', () => {
  const m: Manifest = { kinds: [{ name: 'a', layers: [0, 2] }, { name: 'b', layers: [1] }] };
  assert.equal(kindOfLayer(m, { layer: 1, kind: 1 })!.name, 'b');
  assert.equal(kindOfLayer(m, { layer: 1, kind: 'b' })!.name, 'b');
  assert.equal(kindOfLayer(m, { layer: 2 })!.name, 'a');
  assert.equal(kindOfLayer(m, { layer: 1, kind: 'zz' })!.name, 'zz');
});

test('manifest → HTML: the view keeps its manifest as state, and no path can close the script', () => {
  const state = { manifestPath: '/ws/a</script><script>alert(1)</script>.bundle/manifest.json', source: '/ws/a.lgm' };
  const html = renderManifestHtml(full, { ...opts, state });
  const script = /<script nonce="N0NCE" type="application\/json" id="view-state">([\s\S]*?)<\/script>/.exec(html)![1];
  assert.deepEqual(JSON.parse(script), state);
  assert.doesNotMatch(script, /<\/script>|<script>/);
  assert.doesNotMatch(renderManifestHtml(full, opts), /view-state/);
});

test('manifest → HTML: the page script is the extension\'s own, allowed by the policy, with its nonce', () => {
  const html = renderManifestHtml(full, { ...opts, scriptUri: 'vscode-webview://x/dist/webview.js' });
  const csp = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html)![1];
  assert.match(csp, /script-src 'nonce-N0NCE' vscode-webview:\/\/x(;|$)/);
  assert.match(html, /<script nonce="N0NCE" src="vscode-webview:\/\/x\/dist\/webview\.js"><\/script>/);
  for (const id of ['chip', 'memory', 'roofline', 'spills']) assert.match(html, new RegExp(`id="${id}"`));
});
