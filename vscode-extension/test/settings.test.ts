import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as os from 'node:os';
import {
  chooseInterpreter,
  deploymentInputs,
  initOptions,
  installCommand,
  lowerArgs,
  validatePositiveInt,
  resolvePath,
  authoredName,
} from '../src/settings';

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

test('interpreter: the setting wins over the Python extension', () => {
  assert.deepEqual(chooseInterpreter('/opt/py/bin/python', '/ext/python'), { command: '/opt/py/bin/python', source: 'setting' });
  assert.deepEqual(chooseInterpreter('.venv/bin/python', '/ext/python', '/ws'), { command: '/ws/.venv/bin/python', source: 'setting' });
  assert.deepEqual(chooseInterpreter('python3.11', undefined, '/ws'), { command: 'python3.11', source: 'setting' });
});

test('interpreter: the Python extension when the setting is empty, else python3', () => {
  assert.deepEqual(chooseInterpreter('', '/ext/python'), { command: '/ext/python', source: 'python-extension' });
  assert.deepEqual(chooseInterpreter(undefined, '/ext/python'), { command: '/ext/python', source: 'python-extension' });
  assert.deepEqual(chooseInterpreter('   ', undefined), { command: 'python3', source: 'default' });
  assert.deepEqual(chooseInterpreter(undefined, ''), { command: 'python3', source: 'default' });
});

test('install command: editable install of the workspace checkout, else by name, quoted', () => {
  assert.equal(installCommand('/usr/bin/python3', '/work/main'), '/usr/bin/python3 -m pip install -e /work/main');
  assert.equal(installCommand('/my env/python', undefined), `'/my env/python' -m pip install streamed`);
  assert.equal(installCommand('C:\\Py 3\\python.exe', 'C:\\src\\streamed', true), '& "C:\\Py 3\\python.exe" -m pip install -e "C:\\src\\streamed"');
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
    mode: 'prefill',
    ctx: 2048,
    chunk: 128,
    target: 'sn50',
  });
  assert.deepEqual(lowerArgs('file:///m.lgm', 'batched-tp', { ctx: 1, batch: 2, tp: 4 }, '/c.gguf', 'sn40l'), {
    uri: 'file:///m.lgm',
    mode: 'batched-tp',
    ctx: 1,
    batch: 2,
    tp: 4,
    checkpoint: '/c.gguf',
    target: 'sn40l',
  });
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
