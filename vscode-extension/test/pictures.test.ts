import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { blockLabel, runLabel, runsOf } from '../src/layerRuns';
import { layerTable, programSection, renderManifestHtml, Manifest } from '../src/manifest';
import { firstShown, pictureWidth, picturesMessage, redrawFor, renderChips } from '../src/pictures';

const fixture = (): Manifest =>
  JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'test', 'fixtures', 'manifest-streamed-bundle-2.json'), 'utf8'));
const opts = { cspSource: 'vscode-webview://x', nonce: 'N0NCE' };

test('runs: a repeated block is one run, the widest cover wins, the shorter block on a tie', () => {
  assert.deepEqual(runsOf(['a', 'a', 'a', 'a']), [{ start: 0, period: 1, repeats: 4 }]);
  const qwen = Array.from({ length: 64 }, (_, l) => (l % 4 === 3 ? 'attention' : 'gated deltanet'));
  assert.deepEqual(runsOf(qwen), [{ start: 0, period: 4, repeats: 16 }]);
  assert.deepEqual(runsOf(['a', 'b', 'c']), [0, 1, 2].map((start) => ({ start, period: 1, repeats: 1 })));
  // residency changing part-way splits the run where it changes
  const spill = [...Array(4).fill('a|sram'), ...Array(3).fill('a|hbm'), 'b'];
  assert.deepEqual(runsOf(spill), [{ start: 0, period: 1, repeats: 4 }, { start: 4, period: 1, repeats: 3 }, { start: 7, period: 1, repeats: 1 }]);
  // every row is in exactly one run, in order
  const rows = Array.from({ length: 50 }, (_, i) => String((i * 7) % 5 === 0 ? 'x' : i % 3));
  let at = 0;
  for (const r of runsOf(rows)) {
    assert.equal(r.start, at);
    at += r.period * r.repeats;
  }
  assert.equal(at, rows.length);
});

test('runs: labels say the layers, the block and how often it repeats', () => {
  assert.equal(runLabel(4, 63, ['attention'], 60), 'Layers 4–63 · attention ×60');
  assert.equal(runLabel(0, 63, ['gated deltanet', 'gated deltanet', 'gated deltanet', 'attention'], 16), 'Layers 0–63 · (gated deltanet ×3 · attention) ×16');
  assert.equal(blockLabel(['a', 'b', 'b']), 'a · b ×2');
});

test('layers: identical rows fold into one summary row, each layer still a row of its own, hidden until opened', () => {
  const m = fixture(); // small-gemma3: five windowed layers, one global, twice
  const html = layerTable(m, m.layers!);
  const runs = html.match(/<tr class="run-row"[^]*?<\/tr>/g) ?? [];
  assert.equal(runs.length, 1);
  assert.match(runs[0], /Layers 0–11<\/a><\/td><td>\(attention, window 512 ×5 · attention\) ×2<\/td>/);
  const rows = html.match(/<tr class="layer-row"[^>]*>/g) ?? [];
  assert.equal(rows.length, 12);
  assert.ok(rows.every((r) => / hidden>$/.test(r)));
  // the summary's link reveals the run's first layer; no row's layer cell wraps
  assert.match(runs[0], /<td class="layer"><button type="button" class="run-toggle" aria-expanded="false"[^>]*>▸<\/button> <a href="#" class="layer-link" data-layer="0"/);
  assert.match(renderManifestHtml(m, opts), /td\.layer \{ white-space: nowrap; \}/);
});

test('layers: a layer like no neighbour is a visible row of its own', () => {
  const m: Manifest = { kinds: [{ name: 'a', layers: [0, 2] }, { name: 'b', layers: [1] }], layers: [{ layer: 0, kind: 'a' }, { layer: 1, kind: 'b' }, { layer: 2, kind: 'a' }] };
  const html = layerTable(m, m.layers!);
  assert.doesNotMatch(html, /run-row/);
  assert.equal((html.match(/<tr class="layer-row" data-layer="\d"><td class="layer">/g) ?? []).length, 3);
});

test('embedding and head: each weight with the checkpoint tensor it reads, its storage, shape and bytes', () => {
  const m = fixture();
  const embed = programSection(m, 'embed');
  const w = m.shared!.embed!.weights![0];
  assert.match(embed, /<h2>Embedding<\/h2>/);
  assert.match(embed, new RegExp(`<td><code>${w.name}</code></td><td><code>${w.checkpoint!.replace(/\./g, '\\.')}</code></td>`));
  assert.match(embed, new RegExp(`${w.shape!.join(' × ')}</td>`));
  assert.match(embed, /<span class="k">program<\/span><span class="v">programs\/embed\.json<\/span>/);
  const head = programSection(m, 'head');
  assert.match(head, /<h2>Head<\/h2>/);
  for (const hw of m.shared!.head!.weights!) assert.match(head, new RegExp(`<code>${hw.name}</code>`));
  assert.match(head, /time per step<\/span><span class="v">[0-9.]+ (ns|µs|ms)/);
  assert.match(programSection({ programs: { embed: null, head: 'programs/head.json' } }, 'embed'), /none: a forward bundle/);
  const page = renderManifestHtml(m, opts);
  assert.ok(page.indexOf('<h2>Embedding</h2>') < page.indexOf('<h2>Layers (12)</h2>'));
  assert.ok(page.indexOf('<h2>Layers (12)</h2>') < page.indexOf('<h2>Head</h2>'));
});

test('pictures: one tab per program, the first kind shown, every floorplan placed as the server drew it', () => {
  const chips = [
    { program: 'embed', title: 'embed — 1 op', svg: '<svg class="floorplan" data-x="e"></svg>' },
    { program: 'attention', title: 'attention — 23 ops', svg: '<svg class="floorplan" data-x="a"></svg>' },
    { program: 'head', title: 'head — 3 ops', svg: '<svg class="floorplan" data-x="h"></svg>' },
  ];
  assert.equal(firstShown(chips), 1);
  const html = renderChips(chips);
  assert.equal((html.match(/class="chip-tab"/g) ?? []).length, 3);
  assert.match(html, /data-program="1" aria-selected="true"[^>]*>attention<\/button>/);
  assert.match(html, /<div class="chip-pane" role="tabpanel" data-program="1"><svg class="floorplan" data-x="a">/);
  assert.match(html, /data-program="0" hidden><svg/);
  assert.match(renderChips([]), /No program to draw/);
  const msg = picturesMessage({ chip: chips, memory: { spec: { mark: 'bar' }, spills: ['nothing spills'] }, roofline: { spec: { layer: [] } } });
  assert.deepEqual([msg.type, msg.memory, msg.roofline, msg.spills], ['pictures', { mark: 'bar' }, { layer: [] }, ['nothing spills']]);
  assert.deepEqual(picturesMessage({}).spills, []);
});

test('pictures: a program name cannot inject markup into the tabs', () => {
  const html = renderChips([{ program: '<img src=x onerror=alert(1)>', svg: '' }]);
  assert.doesNotMatch(html, /<img/);
});

test('the pictures are drawn for the width of the panel, within what the server draws for, and again when it changes', () => {
  assert.equal(pictureWidth(612.7), 612);
  assert.equal(pictureWidth(120), 200);
  assert.equal(pictureWidth(20000), 8000);
  assert.equal(pictureWidth(0), undefined);
  assert.equal(pictureWidth(NaN), undefined);
  assert.equal(redrawFor(undefined, 640), true);
  assert.equal(redrawFor(640, 650), false); // a scroll bar coming and going
  assert.equal(redrawFor(640, 1180), true);
  assert.equal(redrawFor(640, undefined), false);
});
