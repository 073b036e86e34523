import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as os from 'node:os';
import {
  bundleFolder,
  chipOf,
  defaultBundleFolder,
  deploymentInputs,
  MODES,
  deploymentSummary,
  initOptions,
  lowerArgs,
  lowerTitle,
  validatePositiveInt,
  resolvePath,
  authoredName,
  briefly,
} from '../src/config';

const getter = (o: Record<string, unknown>) => (k: string) => o[k];

test('settings → init options: defaults when nothing is set', () => {
  assert.deepEqual(initOptions(getter({})), {
    target: 'sn50',
    deployment: { mode: 'decode', ctx: 4096, chunk: 512, batch: 8, tp: 2 },
    checkpoint: null,
    debounceMs: 150,
  });
});

test('settings → init options: every setting is carried, paths resolved against the workspace', () => {
  const o = initOptions(
    getter({
      target: 'sn40l',
      'deployment.mode': 'batched-tp',
      'deployment.ctx': 8192,
      'deployment.chunk': 256,
      'deployment.batch': 16,
      'deployment.tp': 4,
      checkpoint: 'models/tiny.gguf',
      debounceMs: 0,
    }),
    '/ws',
  );
  assert.deepEqual(o, {
    target: 'sn40l',
    deployment: { mode: 'batched-tp', ctx: 8192, chunk: 256, batch: 16, tp: 4 },
    checkpoint: '/ws/models/tiny.gguf',
    debounceMs: 0,
  });
});

test('settings → init options: invalid values fall back to the defaults', () => {
  const o = initOptions(getter({ 'deployment.mode': 'warp', 'deployment.ctx': -3, 'deployment.tp': 1.5, checkpoint: '  ', target: '', debounceMs: -1 }));
  assert.equal(o.deployment.mode, 'decode');
  assert.equal(o.deployment.ctx, 4096);
  assert.equal(o.deployment.tp, 2);
  assert.equal(o.checkpoint, null);
  assert.equal(o.target, 'sn50');
  assert.equal(o.debounceMs, 150);
});

test('settings → init options: a target file path is resolved, a target name is kept', () => {
  assert.equal(initOptions(getter({ target: 'targets/mine.toml' }), '/ws').target, '/ws/targets/mine.toml');
  assert.equal(initOptions(getter({ target: '${workspaceFolder}/t.toml' }), '/ws').target, '/ws/t.toml');
  assert.equal(initOptions(getter({ target: 'sn50' }), '/ws').target, 'sn50');
});

test('resolvePath expands ~ and ${workspaceFolder}', () => {
  assert.equal(resolvePath('~/x.gguf', undefined), `${os.homedir()}/x.gguf`);
  assert.equal(resolvePath('/abs/x', '/ws'), '/abs/x');
  assert.equal(resolvePath('${workspaceFolder}/.venv/bin/python', '/ws'), '/ws/.venv/bin/python');
});

test('deployment inputs: each mode asks for its numbers', () => {
  assert.deepEqual(deploymentInputs('decode'), ['ctx']);
  assert.deepEqual(deploymentInputs('prefill'), ['ctx', 'chunk']);
  assert.deepEqual(deploymentInputs('batched'), ['ctx', 'batch']);
  assert.deepEqual(deploymentInputs('tp'), ['ctx', 'tp']);
  assert.deepEqual(deploymentInputs('batched-tp'), ['ctx', 'batch', 'tp']);
});

test('lowerBundle arguments keep only the numbers of the chosen mode', () => {
  assert.deepEqual(lowerArgs('file:///m.lgm', 'prefill', { ctx: 2048, chunk: 128, batch: 9, tp: 3 }, null, 'sn50'), {
    uri: 'file:///m.lgm',
    show: false,
    mode: 'prefill',
    ctx: 2048,
    chunk: 128,
    target: 'sn50',
  });
  assert.deepEqual(lowerArgs('file:///m.lgm', 'batched-tp', { ctx: 1, batch: 2, tp: 4 }, '/c.gguf', 'sn40l'), {
    uri: 'file:///m.lgm',
    show: false,
    mode: 'batched-tp',
    ctx: 1,
    batch: 2,
    tp: 4,
    checkpoint: '/c.gguf',
    target: 'sn40l',
  });
  assert.equal(lowerArgs('file:///m.lgm', 'decode', { ctx: 8 }, null, 'sn50', '/ws/m.decode.bundle').out, '/ws/m.decode.bundle');
});

test('numbers typed in the inputs are validated', () => {
  assert.equal(validatePositiveInt('4096'), undefined);
  assert.equal(validatePositiveInt(' 12 '), undefined);
  assert.ok(validatePositiveInt('0'));
  assert.ok(validatePositiveInt('-1'));
  assert.ok(validatePositiveInt('1.5'));
  assert.ok(validatePositiveInt('abc'));
});

test('the authored document is named after the config', () => {
  assert.equal(authoredName('/m/llama-3.1-8b/config.json'), 'llama-3.1-8b');
  assert.equal(authoredName('/m/tiny.gguf'), 'tiny');
  assert.equal(authoredName('/m/configs/small-gemma3.json'), 'small-gemma3');
});

test('titles and the status follow the target: a shipped chip by name, a target file as a file', () => {
  assert.equal(chipOf('sn50'), 'SN50');
  assert.equal(chipOf(' SN40L '), 'SN40L');
  assert.equal(chipOf('/ws/targets/mine.toml'), undefined);
  assert.equal(lowerTitle('sn50'), 'Lower SN50 Bundle');
  assert.equal(lowerTitle('sn40l'), 'Lower SN40L Bundle');
  assert.equal(lowerTitle('/ws/mine.toml'), 'Lower Bundle');
  assert.equal(lowerTitle('sn50', true), 'Lower SN50 Bundle With…');
  assert.equal(lowerTitle('/ws/mine.toml', true), 'Lower Bundle With…');
});

test('the deployment summary names the numbers its mode reads, and the chip, each word once', () => {
  const o = initOptions(getter({ 'deployment.mode': 'batched-tp', 'deployment.batch': 16, 'deployment.tp': 4, target: 'sn40l' }));
  assert.equal(deploymentSummary(o), 'batched · batch 16 · tp 4 · ctx 4096 · SN40L');
  assert.equal(deploymentSummary(initOptions(getter({ 'deployment.mode': 'tp', 'deployment.tp': 4 }))), 'tp 4 · ctx 4096 · SN50');
  assert.equal(deploymentSummary(initOptions(getter({ 'deployment.mode': 'prefill', 'deployment.chunk': 256 }))), 'prefill · chunk 256 · ctx 4096 · SN50');
  assert.equal(deploymentSummary(initOptions(getter({ 'deployment.mode': 'batched' }))), 'batched · batch 8 · ctx 4096 · SN50');
  assert.equal(deploymentSummary(initOptions(getter({}))), 'decode · ctx 4096 · SN50');
  for (const mode of MODES) {
    const words = deploymentSummary(initOptions(getter({ 'deployment.mode': mode }))).split(/[ ·-]+/).filter((w) => !/^\d+$/.test(w));
    assert.deepEqual(words, [...new Set(words)], `${mode}: a word said twice`);
  }
  assert.equal(deploymentSummary(initOptions(getter({ target: 'targets/mine.toml' }), '/ws')), 'decode · ctx 4096 · mine.toml');
});

test('the bundle folder setting: empty asks, variables are expanded, relative paths start at the document', () => {
  const doc = '/ws/models/llama.lgm';
  assert.equal(bundleFolder('', doc, 'decode', '/ws'), undefined);
  assert.equal(bundleFolder(undefined, doc, 'decode', '/ws'), undefined);
  assert.equal(bundleFolder('${fileDirname}/${fileBasenameNoExtension}.${mode}.bundle', doc, 'prefill', '/ws'), '/ws/models/llama.prefill.bundle');
  assert.equal(bundleFolder('${workspaceFolder}/build/${fileBasenameNoExtension}', doc, 'decode', '/ws'), '/ws/build/llama');
  assert.equal(bundleFolder('out/${mode}', doc, 'tp', '/ws'), '/ws/models/out/tp');
  assert.equal(bundleFolder('~/bundles/x', doc, 'tp'), `${os.homedir()}/bundles/x`);
  assert.equal(defaultBundleFolder(doc), '/ws/models/llama.bundle');
});

test('a long refusal is cut to a notification’s length at a clause, and says it was cut', () => {
  const long = 'the document has 3 errors; the first, at line 12: `timse` is not an operation of this language, and ' +
    'the statement it is in does not parse, so nothing after it in layer 4 is read until it is fixed';
  const b = briefly(long);
  assert.equal(b.cut, true);
  assert.ok(b.text.length <= 161 && b.text.endsWith('…'), b.text);
  assert.ok(long.startsWith(b.text.slice(0, -1)));
  assert.deepEqual(briefly('short enough'), { text: 'short enough', cut: false });
});
