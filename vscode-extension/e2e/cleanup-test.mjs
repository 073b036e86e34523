#!/usr/bin/env node
// The e2e harness leaves nothing behind, whatever ends it: run.mjs (with the .vsix it built, its own TMPDIR) is ended
// (1) by a browser that cannot start — code-server is up, the checks never begin — and (2) by SIGTERM once the first
// check passed — code-server, its extension host and the language server running, Chromium open. Each time: the exit
// status says what happened, no process refers to the run's temporary folder, and the folder is empty.
//
//   node e2e/cleanup-test.mjs          (after node e2e/run.mjs, which built streamed.vsix)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const vsix = path.resolve(here, '..', 'streamed.vsix');
if (!fs.existsSync(vsix)) {
  console.log(`e2e-cleanup: FAILED: no ${vsix} (run node e2e/run.mjs first)`);
  console.log('e2e-cleanup: 0 passed, 1 failed');
  process.exit(1);
}

/** The processes whose command line or working directory is inside `dir`. */
function processesIn(dir) {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).flatMap((pid) => {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      return cmd.includes(dir) || cwd.startsWith(dir) ? [`${pid}: ${cmd.slice(0, 160)}`] : [];
    } catch {
      return [];
    }
  });
}

async function run(name, env, whenToStop) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'streamed-e2e-cleanup-'));
  const tmpdir = path.join(dir, 'tmp');
  fs.mkdirSync(tmpdir);
  const child = spawn(process.execPath, [path.join(here, 'run.mjs')], {
    env: { ...process.env, TMPDIR: tmpdir, STREAMED_E2E_VSIX: vsix, STREAMED_E2E_ARTIFACTS: path.join(dir, 'artifacts'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stopped = false;
  const take = (b) => {
    out += b;
    if (!stopped && whenToStop?.(out)) {
      stopped = true;
      child.kill('SIGTERM');
    }
  };
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const code = await new Promise((resolve) => child.on('exit', (c, s) => resolve(c ?? s)));
  const left = processesIn(tmpdir);
  const files = fs.readdirSync(tmpdir);
  const problems = [];
  if (left.length) problems.push(`processes left: ${left.join('; ')}`);
  if (files.length) problems.push(`left in the temporary folder: ${files.join(', ')}`);
  for (const p of left) {
    try {
      process.kill(Number(p.split(':')[0]), 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return { name, code, problems, tail: out.split('\n').filter(Boolean).slice(-3).join(' / ') };
}

const results = [
  await run('a browser that cannot start', { CHROMIUM: '/nonexistent/chromium' }),
  await run('SIGTERM while the checks run', {}, (out) => /PASS the workspace's \.venv runs the server/.test(out)),
];
const expected = { 'a browser that cannot start': 1, 'SIGTERM while the checks run': 143 };
let failed = 0;
for (const r of results) {
  const ok = r.code === expected[r.name] && !r.problems.length;
  failed += ok ? 0 : 1;
  console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${r.name}: exit ${r.code}${r.problems.length ? ` — ${r.problems.join('; ')}` : ''} (${r.tail})`);
}
console.log(`e2e-cleanup: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
