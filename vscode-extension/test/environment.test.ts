import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  PROBE,
  bundledWheel,
  envState,
  interpreterCandidates,
  lastLine,
  pipStep,
  readProbe,
  venvPython,
  wheelIdentity,
} from '../src/environment';

const existing = (...files: string[]) => (f: string) => files.includes(f);

test('interpreters: the setting alone when it is set, resolved against the workspace', () => {
  const inputs = { workspaceFolders: ['/ws'], pythonExtension: '/ext/python', exists: existing('/ws/.venv/bin/python'), windows: false };
  assert.deepEqual(interpreterCandidates({ ...inputs, setting: '/opt/py/bin/python' }), [{ python: '/opt/py/bin/python', source: 'setting' }]);
  assert.deepEqual(interpreterCandidates({ ...inputs, setting: '.venv/bin/python' }), [{ python: '/ws/.venv/bin/python', source: 'setting' }]);
  assert.deepEqual(interpreterCandidates({ ...inputs, setting: 'python3.11' }), [{ python: 'python3.11', source: 'setting' }]);
});

test("interpreters: the workspace's .venv and venv, then the Python extension's, then python3", () => {
  const got = interpreterCandidates({
    setting: '  ',
    workspaceFolders: ['/ws', '/other'],
    pythonExtension: '/ext/python',
    exists: existing('/ws/.venv/bin/python', '/ws/venv/bin/python', '/other/venv/bin/python'),
    windows: false,
  });
  assert.deepEqual(got, [
    { python: '/ws/.venv/bin/python', source: 'workspace' },
    { python: '/ws/venv/bin/python', source: 'workspace' },
    { python: '/other/venv/bin/python', source: 'workspace' },
    { python: '/ext/python', source: 'python-extension' },
    { python: 'python3', source: 'path' },
  ]);
  const bare = interpreterCandidates({ setting: undefined, workspaceFolders: [], exists: () => false, windows: false });
  assert.deepEqual(bare, [{ python: 'python3', source: 'path' }]);
  // The Python extension pointing at the workspace's .venv is tried once.
  const same = interpreterCandidates({ setting: '', workspaceFolders: ['/ws'], pythonExtension: '/ws/.venv/bin/python', exists: existing('/ws/.venv/bin/python'), windows: false });
  assert.deepEqual(same.map((c) => c.source), ['workspace', 'path']);
});

test('interpreters on Windows live in Scripts and the PATH one is python', () => {
  assert.equal(venvPython('C:\\ws\\.venv', true), path.join('C:\\ws\\.venv', 'Scripts', 'python.exe'));
  const got = interpreterCandidates({ setting: '', workspaceFolders: [], exists: () => false, windows: true });
  assert.deepEqual(got, [{ python: 'python', source: 'path' }]);
});

test('the probe, run by a real Python, tells a Python without the server from one with it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probe-'));
  try {
    const run = (extraPath?: string) => {
      const r = spawnSync('python3', ['-I', '-c', extraPath ? `import sys; sys.path.insert(0, ${JSON.stringify(extraPath)})\n${PROBE}` : PROBE], { encoding: 'utf8' });
      return readProbe(r.stdout, r.status === 0 ? undefined : r.stderr);
    };
    const without = run();
    assert.equal(without.status, 'runs');
    assert.match(without.detail, /ModuleNotFoundError: No module named 'streamed_lsp'/);
    assert.match(without.version!, /^3\.\d+$/);
    fs.mkdirSync(path.join(dir, 'streamed_lsp'));
    fs.writeFileSync(path.join(dir, 'streamed_lsp', '__init__.py'), '');
    assert.equal(run(dir).status, 'server');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a probe that could not run, or a Python too old, says so', () => {
  assert.deepEqual(readProbe('', 'spawn /nope ENOENT'), { status: 'broken', detail: 'spawn /nope ENOENT' });
  const old = readProbe('{"version": [3, 9], "executable": "/usr/bin/python3.9", "server": false, "error": "x"}');
  assert.equal(old.status, 'old');
  assert.equal(old.detail, 'Python 3.9 is older than 3.11');
  assert.equal(readProbe('{"version": [3, 12], "server": false}').status, 'runs');
  assert.equal(readProbe('noise\n{"version": [3, 11], "server": true}').status, 'server');
});

test('the private environment is current only for the extension version and wheel that made it', () => {
  const wheel = wheelIdentity('/ext/server/streamed_lgm-0.2.0-py3-none-any.whl', 'ab'.repeat(32));
  assert.equal(wheel, 'streamed_lgm-0.2.0-py3-none-any.whl#abababababababab');
  const stamp = { extension: '0.2.0', wheel, python: '/usr/bin/python3' };
  assert.equal(envState(undefined, '0.2.0', wheel), 'missing');
  assert.equal(envState(stamp, '0.2.0', wheel), 'current');
  assert.equal(envState(stamp, '0.3.0', wheelIdentity('streamed_lgm-0.3.0-py3-none-any.whl', 'cd'.repeat(32))), 'outdated');
  // The same version rebuilt: another wheel.
  assert.equal(envState(stamp, '0.2.0', wheelIdentity('streamed_lgm-0.2.0-py3-none-any.whl', 'cd'.repeat(32))), 'outdated');
});

test('the bundled wheel is the distribution of our own name', () => {
  assert.equal(bundledWheel(['README', 'streamed_lgm-0.1.0-py3-none-any.whl']), 'streamed_lgm-0.1.0-py3-none-any.whl');
  assert.equal(bundledWheel(['streamed-0.0.1-py3-none-any.whl']), undefined);
  assert.equal(bundledWheel([]), undefined);
});

test('a failure is read by its last line; pip by the steps a person follows', () => {
  const traceback = 'Traceback (most recent call last):\n  File "<frozen runpy>", line 198\nModuleNotFoundError: No module named \'lsprotocol\'\n\n';
  assert.equal(lastLine(traceback), "ModuleNotFoundError: No module named 'lsprotocol'");
  assert.equal(lastLine(''), '');
  assert.equal(lastLine('x'.repeat(400)).length, 300);
  assert.equal(pipStep('Collecting numpy<3,>=1.26 (from streamed-lgm==0.1.0)'), 'collecting numpy<3,>=1.26');
  assert.equal(pipStep('  Downloading numpy-2.3.1-cp311-manylinux_2_28_x86_64.whl (16.9 MB)'), 'downloading numpy-2.3.1-cp311-manylinux_2_28_x86_64.whl');
  assert.equal(pipStep('Installing collected packages: numpy, lsprotocol, pygls, streamed-lgm'), 'installing numpy, lsprotocol, pygls, streamed-lgm');
  assert.equal(pipStep('Processing /ext/server/streamed_lgm-0.1.0-py3-none-any.whl'), 'processing streamed_lgm-0.1.0-py3-none-any.whl');
  assert.equal(pipStep('     ━━━━━━━━━━━━━━━━━━ 16.9/16.9 MB 40 MB/s eta 0:00:00'), undefined);
});
