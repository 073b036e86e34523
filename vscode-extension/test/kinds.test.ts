import { test } from 'node:test';
import assert from 'node:assert/strict';
import { conciseReason, findLayerLine, kindsToTree, layerAtLine, layerRanges, mapLensCommand, plural, refusalReason, statusText } from '../src/kinds';

test('kinds → tree items: kinds with their layers, the first marked; short descriptions, everything in the tooltip', () => {
  const t = kindsToTree([
    { name: 'attention, window 512', layers: [0, 1, 3, 4], representative: 0 },
    { name: 'attention', layers: [2, 5], representative: 2 },
  ]);
  assert.equal(t.length, 2);
  assert.equal(t[0].label, 'attention, window 512');
  assert.equal(t[0].description, '4 layers');
  assert.equal(t[0].icon, 'kind');
  assert.deepEqual(t[0].children!.map((c) => c.label), ['Layer 0', 'Layer 1', 'Layer 3', 'Layer 4']);
  assert.deepEqual(t[0].children!.map((c) => c.layer), [0, 1, 3, 4]);
  assert.equal(t[0].children![0].description, 'first');
  assert.equal(t[0].children![0].icon, 'representative');
  assert.equal(t[0].children![1].description, undefined);
  assert.equal(t[1].tooltip, 'attention\n2 layers: 2, 5\nfirst: layer 2, its representative');
  assert.notEqual(t[0].id, t[1].id);
  // (a sidebar shows about 30 characters beside a label: every description fits)
  for (const n of t) assert.ok(n.description!.length <= 20, n.description);
});

test('kinds → tree items: a refused kind says so briefly; its reason is a row of its own, whole in its tooltip', () => {
  const why = 'the working set of layer 7 (latent attention) needs 812 MB of SRAM and the SN50 has 520 MB';
  const [k] = kindsToTree([{ name: 'latent attention', layers: [7], representative: 7, reject: why }]);
  assert.equal(k.icon, 'kind-refused');
  assert.equal(k.description, '1 layer');
  assert.match(k.tooltip!, new RegExp(`lowering refused under the current deployment: ${why.replace(/[()]/g, '\\$&')}$`));
  assert.equal(k.children![0].icon, 'reason');
  assert.equal(k.children![0].label, 'The working set of layer 7 (latent attention) needs 812 MB of SRAM and the SN50 has 520 MB');
  assert.equal(k.children![0].tooltip, `Lowering refused: ${why}`);
  assert.equal(k.children![1].label, 'Layer 7');
  assert.equal(k.collapsed, false);
});

test('a refusal row leaves out what its place in the tree says: refused, and which layer and kind', () => {
  assert.equal(
    conciseReason('the bundle is refused: tensor parallel over 4 chips: layer 0 (attention, window 32): the key/value heads of attention (2) do not split over 4 chips'),
    'Tensor parallel over 4 chips: the key/value heads of attention (2) do not split over 4 chips',
  );
  assert.equal(
    conciseReason('the layer 2 (attention (layer 2)) program does not lower: needs 537 MB of SRAM; the SN50 has 432 MB'),
    'Needs 537 MB of SRAM; the SN50 has 432 MB',
  );
  assert.equal(
    conciseReason('the bundle program does not lower: tensor parallel over 8 chips: layer 2 (attention): the query heads of attention (4) do not split over 8 chips (and so does the other layer of `attention`)'),
    'Tensor parallel over 8 chips: the query heads of attention (4) do not split over 8 chips (and so does the other layer of `attention`)',
  );
  assert.equal(conciseReason('layer 3 (gated deltanet): its state needs 3 GB'), 'Its state needs 3 GB');
});

test('kinds → tree items: big kinds start collapsed; singular wording', () => {
  const [big, one] = kindsToTree([
    { name: 'attention', layers: Array.from({ length: 52 }, (_, i) => i), representative: 0 },
    { name: 'attention (layer 52)', layers: [52], representative: 52 },
  ]);
  assert.equal(big.collapsed, true);
  assert.equal(one.collapsed, false);
  assert.equal(one.description, '1 layer');
});

test('layer ranges are compact', () => {
  assert.equal(layerRanges([0, 1, 2, 3, 5, 7, 8]), '0–3, 5, 7, 8');
  assert.equal(layerRanges([4]), '4');
  assert.equal(layerRanges([]), '');
});

test('status bar: kinds · layers; refused lowering is an error', () => {
  assert.equal(statusText(undefined), undefined);
  assert.deepEqual(statusText({ uri: 'u', kinds: 2, layers: 64, rejects: 0 })?.text, '$(layers) 2 kinds · 64 layers');
  const e = statusText({ uri: 'u', kinds: 1, layers: 1, rejects: 1 })!;
  assert.equal(e.text, '$(error) 1 kind · 1 layer · 1 refused');
  assert.equal(e.error, true);
});

test('find a layer heading, and the layer of a line', () => {
  const text = '# T\n## Model\nLet d be 1.\n## Layer 1\nLet x be 2.\n## Layer 10: global\nReturn y.\n## Head\nReturn z.\n';
  assert.equal(findLayerLine(text, 1), 3);
  assert.equal(findLayerLine(text, 10), 5);
  assert.equal(findLayerLine(text, 0), -1);
  assert.equal(layerAtLine(text, 4), 1);
  assert.equal(layerAtLine(text, 6), 10);
  assert.equal(layerAtLine(text, 8), undefined);
  assert.equal(layerAtLine(text, 0), undefined);
});

test('code lens commands of the server map to the client commands', () => {
  assert.deepEqual(mapLensCommand({ title: 'a', command: 'streamed.goToRepresentative', arguments: [1] }), {
    title: 'a',
    command: 'streamed.client.goToRepresentative',
    arguments: [1],
  });
  assert.equal(mapLensCommand({ title: 'b', command: 'streamed.lowerBundle' })!.command, 'streamed.client.lowerBundle');
  assert.equal(mapLensCommand({ title: 'c', command: 'editor.action.showReferences' })!.command, 'editor.action.showReferences');
  assert.equal(mapLensCommand(undefined), undefined);
});

test('a refusal in a notification: its reason without the seed\'s prefix and the other layers, the values that lower apart', () => {
  // The server's sentences (streamed/spatial/diagnose.py) for tiny-llama over 8 chips and a context that does not fit.
  assert.deepEqual(
    refusalReason('the bundle program does not lower: tensor parallel over 8 chips: layer 0 (attention): the query heads of attention (4) do not split over 8 chips (and so do the 3 other layers of `attention`); tp 2 or 4 lower'),
    { why: 'tensor parallel over 8 chips: layer 0 (attention): the query heads of attention (4) do not split over 8 chips', lowers: 'tp 2 or 4 lower' },
  );
  assert.deepEqual(
    refusalReason('the bundle program does not lower: the KV caches need 3.28 GB per chip; the states of layer 2 do not fit; ctx 100000 lowers'),
    { why: 'the KV caches need 3.28 GB per chip; the states of layer 2 do not fit', lowers: 'ctx 100000 lowers' },
  );
  assert.deepEqual(refusalReason('the layer 1 (attention) program does not lower: `attention` reads `k1`, which is not a cache (and so does the other layer of `attention`)'),
    { why: '`attention` reads `k1`, which is not a cache', lowers: undefined });
});

test('counts read as English: one kind, two layers', () => {
  assert.equal(plural(1, 'kind'), '1 kind');
  assert.equal(plural(4, 'layer'), '4 layers');
});
