import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findLayerLine, kindsToTree, layerAtLine, layerRanges, mapLensCommand, statusText } from '../src/kinds';

test('kinds → tree items: kinds with their layers, representative marked', () => {
  const t = kindsToTree([
    { name: 'attention, window 512', layers: [0, 1, 3, 4], representative: 0 },
    { name: 'attention', layers: [2, 5], representative: 2 },
  ]);
  assert.equal(t.length, 2);
  assert.equal(t[0].label, 'attention, window 512');
  assert.equal(t[0].description, '4 layers · first: layer 0');
  assert.equal(t[0].icon, 'kind');
  assert.deepEqual(t[0].children!.map((c) => c.label), ['Layer 0', 'Layer 1', 'Layer 3', 'Layer 4']);
  assert.deepEqual(t[0].children!.map((c) => c.layer), [0, 1, 3, 4]);
  assert.equal(t[0].children![0].description, 'representative');
  assert.equal(t[0].children![0].icon, 'representative');
  assert.equal(t[0].children![1].description, undefined);
  assert.match(t[1].tooltip!, /2 layers: 2, 5/);
  assert.notEqual(t[0].id, t[1].id);
});

test('kinds → tree items: a refused kind shows the reason', () => {
  const [k] = kindsToTree([{ name: 'latent attention', layers: [7], representative: 7, reject: 'latent cache exceeds SRAM' }]);
  assert.equal(k.icon, 'kind-refused');
  assert.equal(k.description, 'refused: latent cache exceeds SRAM');
  assert.match(k.tooltip!, /lowering refused: latent cache exceeds SRAM/);
  assert.equal(k.children![0].label, 'Layer 7');
});

test('kinds → tree items: big kinds start collapsed; singular wording', () => {
  const [big, one] = kindsToTree([
    { name: 'attention', layers: Array.from({ length: 52 }, (_, i) => i), representative: 0 },
    { name: 'attention (layer 52)', layers: [52], representative: 52 },
  ]);
  assert.equal(big.collapsed, true);
  assert.equal(one.collapsed, false);
  assert.equal(one.description, '1 layer · first: layer 52');
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
