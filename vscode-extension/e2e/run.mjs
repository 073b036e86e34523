#!/usr/bin/env node
// End-to-end tests in a real VS Code: code-server with the packaged .vsix installed, driven in Debian's headless
// Chromium with playwright-core. Screenshots of every step go to e2e/artifacts/.
//
//   node e2e/run.mjs                      against the language server (`<python> -m streamed_lsp`)
//   STREAMED_PYTHON=/path/python          the Python for the server (default: the repository's .venv, else python3)
//   STREAMED_E2E_DOC=path.lgm             the model to open (default: grammars/tests/snap/tiny.lgm)
//   STREAMED_E2E_KEEP=1                   keep the temporary workspace and code-server profile
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.resolve(here, '..');
const repo = path.resolve(ext, '..');
const artifacts = path.join(here, 'artifacts');
const CS_VERSION = process.env.CODE_SERVER_VERSION || '4.100.3';
const cache = process.env.STREAMED_E2E_CACHE || path.join(here, '.cache');
const codeServer = path.join(cache, `code-server-${CS_VERSION}`, 'node_modules', '.bin', 'code-server');
const t0 = Date.now();
const log = (m) => console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);

// ------------------------------------------------------------------------------------------------ the server's Python
const venvPython = path.join(repo, '.venv', 'bin', 'python');
const basePython = process.env.STREAMED_PYTHON || (fs.existsSync(venvPython) ? venvPython : 'python3');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'streamed-e2e-'));
const python = basePython;
const probe = spawnSync(python, ['-c', 'import streamed_lsp'], { encoding: 'utf8' });
if (probe.status !== 0) {
  console.log(`SKIPPED e2e: the language server module streamed_lsp is not importable with ${python}:`);
  console.log(`  ${(probe.stderr || probe.error?.message || '').trim().split('\n').pop()}`);
  fs.rmSync(tmp, { recursive: true, force: true });
  process.exit(0);
}
log(`server: streamed_lsp with ${python}`);

// ------------------------------------------------------------------------------------------------ setup
execFileSync('bash', [path.join(here, 'setup.sh')], { stdio: 'inherit' });
const vsix = path.join(ext, 'streamed.vsix');
if (!fs.existsSync(vsix)) execFileSync('npm', ['run', '-s', 'package'], { cwd: ext, stdio: 'inherit' });
fs.rmSync(artifacts, { recursive: true, force: true });
fs.mkdirSync(artifacts, { recursive: true });

const userData = path.join(tmp, 'user-data');
const extensionsDir = path.join(tmp, 'extensions');
const workspace = path.join(tmp, 'workspace');
fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
fs.mkdirSync(workspace, { recursive: true });
const docSrc = process.env.STREAMED_E2E_DOC || path.join(repo, 'grammars', 'tests', 'snap', 'tiny.lgm');
const docName = path.basename(docSrc);
fs.copyFileSync(docSrc, path.join(workspace, docName));
fs.writeFileSync(
  path.join(userData, 'User', 'settings.json'),
  JSON.stringify(
    {
      'security.workspace.trust.enabled': false,
      'workbench.startupEditor': 'none',
      'workbench.tips.enabled': false,
      'workbench.enableExperiments': false,
      'extensions.ignoreRecommendations': true,
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'telemetry.telemetryLevel': 'off',
      'update.mode': 'none',
      'git.enabled': false,
      'editor.codeLens': true,
      'editor.minimap.enabled': false,
      'window.restoreWindows': 'none',
      'workbench.colorTheme': 'Default Dark Modern',
      'streamed.server.python': python,
      'streamed.trace.server': 'messages',
    },
    null,
    2,
  ),
);
const csConfig = path.join(tmp, 'code-server.yaml');
fs.writeFileSync(csConfig, 'auth: none\ncert: false\n');
const csArgs = ['--config', csConfig, '--user-data-dir', userData, '--extensions-dir', extensionsDir];
log('installing the .vsix');
execFileSync(codeServer, [...csArgs, '--install-extension', vsix], { stdio: 'inherit' });

const port = await new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const csLog = fs.openSync(path.join(artifacts, 'code-server.log'), 'w');
const cs = spawn(
  codeServer,
  [...csArgs, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check',
    '--disable-workspace-trust', '--disable-getting-started-override', workspace],
  { stdio: ['ignore', csLog, csLog], detached: true, env: { ...process.env, PASSWORD: undefined } },
);
const base = `http://127.0.0.1:${port}`;
for (let i = 0; ; i++) {
  try {
    const r = await fetch(`${base}/healthz`);
    if (r.ok) break;
  } catch {
    /* not up yet */
  }
  if (i > 120) throw new Error('code-server did not start; see e2e/artifacts/code-server.log');
  await new Promise((r) => setTimeout(r, 500));
}
log(`code-server up on ${base}`);

// ------------------------------------------------------------------------------------------------ the browser
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
const page = await context.newPage();
const consoleLines = [];
page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));

const results = [];
let step = 0;
async function shot(name) {
  const file = path.join(artifacts, `${String(++step).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file });
  return file;
}
async function check(name, fn) {
  const started = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    log(`PASS ${name} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
  } catch (e) {
    results.push({ name, ok: false, error: e });
    log(`FAIL ${name}: ${e?.message ?? e}`);
    await shot(`FAILED-${name.replace(/[^a-z0-9]+/gi, '-')}`).catch(() => undefined);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, fn, timeout = 30000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (${last.message})` : ''}`);
}
async function runCommand(title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible' });
  await input.fill(`>${title}`);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  await row.waitFor({ state: 'visible', timeout: 10000 });
  await sleep(150);
  await page.keyboard.press('Enter');
}
async function goToLine(line, col = 1) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible' });
  await input.fill(`:${line}:${col}`);
  await sleep(150);
  await page.keyboard.press('Enter');
  await sleep(200);
}
async function cursorPosition() {
  const t = await page.locator('.statusbar-item[id="status.editor.selection"]').innerText();
  const m = /Ln (\d+), Col (\d+)/.exec(t);
  return m ? { line: Number(m[1]), col: Number(m[2]) } : undefined;
}
const docText = fs.readFileSync(path.join(workspace, docName), 'utf8');
const docLines = docText.split('\n');
const lineOf = (re, from = 0) => {
  for (let i = from; i < docLines.length; i++) if (re.test(docLines[i])) return i;
  return -1;
};
const layerHeadings = docLines.map((l, i) => (/^##\s*Layer\s+\d+/.test(l) ? i : -1)).filter((i) => i >= 0);

try {
  log('opening VS Code');
  await page.goto(`${base}/?folder=${encodeURIComponent(workspace)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await page.locator('.explorer-folders-view .monaco-list-row', { hasText: docName }).first().waitFor({ timeout: 60000 });

  await check('the model opens with highlighting applied', async () => {
    await page.locator('.explorer-folders-view .monaco-list-row', { hasText: docName }).first().click();
    await page.locator('.monaco-editor .view-lines').first().waitFor();
    await waitFor('the language mode to be the model language', async () =>
      /Streamed model program/.test(await page.locator('.statusbar-item[id="status.editor.mode"]').innerText()));
    // Tokens are coloured by the grammar: `Let` (keyword), a name and an operation in different colours.
    const colours = await waitFor('coloured tokens', async () => {
      const c = await page.evaluate(() => {
        const out = {};
        for (const span of document.querySelectorAll('.monaco-editor .view-lines .view-line span span')) {
          const t = span.textContent.trim();
          if (['Let', 'rmsnorm', 'weight', 'Return', '64', '--'].includes(t) && !out[t]) out[t] = getComputedStyle(span).color;
        }
        return out;
      });
      return c.Let && c.weight && c.Let !== c.weight ? c : undefined;
    });
    const distinct = new Set(Object.values(colours));
    if (distinct.size < 3) throw new Error(`expected at least 3 token colours, got ${JSON.stringify(colours)}`);
    await shot('highlighting');
  });

  await check('the status bar shows kinds and layers', async () => {
    const item = page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first();
    await item.waitFor({ timeout: 60000 });
    const text = await item.innerText();
    if (!new RegExp(`· ${layerHeadings.length} layers`).test(text)) throw new Error(`status bar says "${text}"`);
    log(`  status bar: ${text.trim()}`);
  });

  await check('a code lens on a layer header names its kind', async () => {
    const lens = page.locator('.codelens-decoration', { hasText: /· \d+ layers? · first: layer \d+/ }).first();
    await lens.waitFor({ timeout: 60000 });
    log(`  code lens: ${(await lens.innerText()).trim()}`);
    await shot('code-lens');
  });

  await check('the Layer Kinds view lists the kinds', async () => {
    const header = page.locator('.pane-header', { hasText: 'Layer Kinds' });
    await header.waitFor({ timeout: 20000 });
    // Give the view the sidebar: collapse the folder's pane.
    const folderHeader = page.locator('.pane-header', { hasText: /^workspace/i }).first();
    if ((await folderHeader.getAttribute('aria-expanded')) === 'true') await folderHeader.click();
    if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
    const pane = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Layer Kinds' }) });
    const kindRows = pane.locator('.monaco-list-row[aria-level="1"]');
    await waitFor('kind rows', async () => (await kindRows.count()) >= 1, 30000);
    const labels = await kindRows.allInnerTexts();
    log(`  kinds: ${labels.map((l) => l.replace(/\s+/g, ' ').trim()).join(' | ')}`);
    if (!labels.some((l) => /attention/.test(l))) throw new Error(`no attention kind in ${labels}`);
    const layerRows = pane.locator('.monaco-list-row[aria-level="2"]', { hasText: /^Layer \d+/ });
    await waitFor('layer rows', async () => (await layerRows.count()) >= 1);
    // Clicking a layer reveals its heading: the last layer row on screen.
    const texts = await layerRows.allInnerTexts();
    const n = Number(/Layer (\d+)/.exec(texts[texts.length - 1])[1]);
    const heading = lineOf(new RegExp(`^##\\s*Layer\\s+${n}(?![0-9])`));
    await layerRows.nth(texts.length - 1).click();
    await waitFor(`the cursor on ## Layer ${n}`, async () => (await cursorPosition())?.line === heading + 1);
    await shot('layer-kinds-view');
  });

  await check('Go to Representative moves the cursor to the representative layer', async () => {
    // A line inside a layer that is not its kind's representative: the second layer's 5th line.
    const second = layerHeadings[1];
    const target = second + 5;
    await page.locator('.monaco-editor .view-lines').first().click();
    await goToLine(target + 1, 5);
    const before = await cursorPosition();
    if (before?.line !== target + 1) throw new Error(`could not place the cursor: ${JSON.stringify(before)}`);
    await page.keyboard.press('Control+Alt+R');
    const after = await waitFor('the cursor to move', async () => {
      const p = await cursorPosition();
      return p && p.line !== before.line ? p : undefined;
    }, 20000);
    const inFirst = after.line - 1 >= layerHeadings[0] && after.line - 1 < layerHeadings[1];
    log(`  cursor ${before.line}:${before.col} → ${after.line}:${after.col}`);
    if (!inFirst) throw new Error(`cursor went to line ${after.line}, not into the first layer`);
    await shot('go-to-representative');
  });

  await check('a divergence inserted in a layer appears in the Problems panel', async () => {
    // Change the epsilon of one rmsnorm in the fourth layer (a layer like its siblings): `epsilon 1e-6` → `1e-5`;
    // without an epsilon, `heads H` of a rope → `heads 2H`.
    const layerIdx = layerHeadings.length >= 4 ? 3 : layerHeadings.length - 1;
    const from = layerHeadings[layerIdx];
    const until = layerHeadings[layerIdx + 1] ?? docLines.length;
    let ln = lineOf(/\brmsnorm of .*epsilon [0-9.e-]+/, from);
    let re = /(epsilon )([0-9.e-]+?)(\.?\s*(--.*)?)$/;
    let replace = (v) => (v === '1e-5' ? '1e-4' : '1e-5');
    if (ln < 0 || ln >= until) {
      ln = lineOf(/\brope of .* heads \d+/, from);
      re = /(heads )(\d+)(.*)$/;
      replace = (v) => String(Number(v) * 2);
    }
    const m = re.exec(docLines[ln]);
    const col = m.index + m[1].length;
    const kindsBefore = Number(/(\d+) kinds?/.exec(await page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first().innerText())[1]);
    await page.locator('.monaco-editor .view-lines').first().click();
    await goToLine(ln + 1, col + 1);
    await page.keyboard.press('Shift+End');
    await page.keyboard.insertText(replace(m[2]) + m[3]);
    log(`  edited line ${ln + 1}: ${docLines[ln].trim()} → ${m[1]}${replace(m[2])}`);
    await page.keyboard.press('Control+Shift+M');
    const marker = page.locator('.markers-panel .monaco-list-row', { hasText: /diverg|differ/i }).first();
    await marker.waitFor({ timeout: 30000 });
    log(`  problem: ${(await marker.innerText()).replace(/\s+/g, ' ').trim().slice(0, 200)}`);
    // Shown once: the diagnostics are not duplicated (push and pull).
    const rows = await page.locator('.markers-panel .monaco-list-row[aria-level="2"]').allInnerTexts();
    const dupes = rows.filter((r, i) => rows.indexOf(r) !== i);
    if (dupes.length) throw new Error(`diagnostics shown twice: ${dupes[0].replace(/\s+/g, ' ').slice(0, 120)}`);
    // The Layer Kinds view and the status bar follow the analysis: the edited layer is a kind of its own now.
    const kindsPane = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Layer Kinds' }) });
    const status = page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first();
    const statusKinds = async () => Number(/(\d+) kinds?/.exec(await status.innerText())[1]);
    await waitFor('the status bar to count one more kind', async () => (await statusKinds()) === kindsBefore + 1, 20000);
    // The code lens of the edited layer names its new kind.
    const editedHeading = docLines[from];
    await waitFor('the code lens of the edited layer to change', async () => {
      const lenses = await page.locator('.codelens-decoration').allInnerTexts();
      return lenses.some((t) => /\(layer \d+\)|· 1 layer ·/.test(t));
    }, 20000);
    log(`  code lenses refreshed (${editedHeading.trim()})`);
    // (rows are virtualised: a kind row's aria-setsize is the number of kinds)
    await waitFor('the Layer Kinds view to list one more kind', async () =>
      Number(await kindsPane.locator('.monaco-list-row[aria-level="1"]').first().getAttribute('aria-setsize')) === kindsBefore + 1, 20000);
    await shot('divergence-in-problems');
    // Undo, and the problem goes away.
    await page.locator('.monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+Z');
    await page.keyboard.press('Control+S');
    await waitFor('the divergence to clear', async () => (await page.locator('.markers-panel .monaco-list-row', { hasText: /diverg|differ/i }).count()) === 0);
    await waitFor('the code lenses to name the kinds again', async () => {
      const lenses = await page.locator('.codelens-decoration').allInnerTexts();
      return lenses.length > 0 && !lenses.some((t) => /\(layer \d+\)|· 1 layer ·/.test(t));
    }, 20000);
    await runCommand('View: Hide Panel');
  });

  await check('Lower SN50 Bundle writes the bundle and opens the manifest view', async () => {
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Lower SN50 Bundle');
    const input = page.locator('.quick-input-widget input');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'decode' }).first().waitFor();
    await shot('lower-pick-deployment');
    await input.fill('decode');
    await sleep(150);
    await page.keyboard.press('Enter');
    await waitFor('the ctx input', async () => /ctx/.test(await page.locator('.quick-input-widget').innerText()));
    await page.keyboard.press('Enter'); // ctx: the default from settings
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'No checkpoint' }).first().waitFor();
    await input.fill('No checkpoint');
    await sleep(150);
    await page.keyboard.press('Enter');
    // The manifest view: a webview (nested iframes) with one row per layer.
    const frame = await waitFor('the manifest webview', async () => {
      for (const f of page.frames()) {
        if ((await f.locator('#layers').count().catch(() => 0)) > 0) return f;
      }
      return undefined;
    }, 120000);
    const rows = await waitFor('layer rows', async () => {
      const n = await frame.locator('tr.layer-row').count();
      return n > 0 ? n : undefined;
    });
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
    const bundles = fs.readdirSync(workspace, { recursive: true }).filter((f) => String(f).endsWith('manifest.json'));
    if (!bundles.length) throw new Error('no manifest.json written in the workspace');
    log(`  manifest: ${bundles.join(', ')}; ${rows} layer rows`);
    await sleep(500);
    const file = await shot('manifest-view');
    fs.copyFileSync(file, path.join(artifacts, 'extension.png'));
    // A layer row links back to the document.
    await frame.locator('a.layer-link').nth(2).click();
    await waitFor('the document to show the layer', async () => {
      const p = await cursorPosition();
      return p && layerHeadings.includes(p.line - 1);
    }, 20000);
  });
  await check('Streamed: Open Manifest shows the bundle of the document again', async () => {
    const tab = page.locator('.tab', { hasText: /^Manifest/ }).first();
    await tab.click();
    await page.keyboard.press('Control+W');
    await waitFor('the manifest view to close', async () => (await page.locator('.tab', { hasText: /^Manifest/ }).count()) === 0);
    await page.locator('.tab', { hasText: docName }).first().click();
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Open Manifest');
    const frame = await waitFor('the manifest webview', async () => {
      for (const f of page.frames()) if ((await f.locator('#layers').count().catch(() => 0)) > 0) return f;
      return undefined;
    }, 30000);
    const rows = await frame.locator('tr.layer-row').count();
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
  });

  await check('Author Model from Config… writes the document and opens it', async () => {
    const cfgSrc = path.join(repo, 'examples', 'configs', 'small-gemma3.json');
    if (!fs.existsSync(cfgSrc)) throw new Error(`no ${cfgSrc}`);
    fs.mkdirSync(path.join(workspace, 'configs'), { recursive: true });
    const cfg = path.join(workspace, 'configs', 'small-gemma3.json');
    fs.copyFileSync(cfgSrc, cfg);
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Author Model from Config');
    // code-server's file dialogs are quick inputs holding a path.
    const input = page.locator('.quick-input-widget input');
    await waitFor('the open dialog', async () => (await input.isVisible()) && (await input.inputValue()).startsWith('/'));
    await input.fill(cfg);
    await sleep(300);
    await shot('author-pick-config');
    await page.keyboard.press('Enter');
    await waitFor('the save dialog', async () => (await input.isVisible()) && /small-gemma3\.lgm$/.test(await input.inputValue()), 20000);
    await page.keyboard.press('Enter');
    const out = path.join(workspace, 'small-gemma3.lgm');
    await waitFor('the authored document', async () => fs.existsSync(out), 60000);
    await page.locator('.tab', { hasText: 'small-gemma3.lgm' }).first().waitFor({ timeout: 20000 });
    await page.locator('.codelens-decoration', { hasText: /first: layer/ }).first().waitFor({ timeout: 60000 });
    log(`  authored ${path.basename(out)}: ${fs.readFileSync(out, 'utf8').split('\n')[0]}`);
    await shot('authored-document');
  });

  // The server process of this VS Code: the python running streamed_lsp whose working directory is our workspace.
  const serverPids = () =>
    fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('streamed_lsp') && fs.readlinkSync(`/proc/${pid}/cwd`) === workspace;
      } catch {
        return false;
      }
    }).map(Number);

  await check('a crashed server is restarted, and Streamed: Restart Server restarts it', async () => {
    const [pid] = await waitFor('the server process', async () => serverPids()[0] !== undefined && serverPids(), 10000);
    process.kill(pid, 'SIGKILL');
    const [pid2] = await waitFor('a new server process', async () => {
      const p = serverPids();
      return p.length && !p.includes(pid) ? p : undefined;
    }, 30000);
    log(`  killed server ${pid}; restarted as ${pid2}`);
    await waitFor('the restarted server to analyse the document', async () =>
      (await page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).count()) > 0, 30000);
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Restart Server');
    const [pid3] = await waitFor('the restarted server process', async () => {
      const p = serverPids();
      return p.length && !p.includes(pid2) ? p : undefined;
    }, 30000);
    log(`  Restart Server: ${pid2} → ${pid3}`);
    await page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first().waitFor({ timeout: 30000 });
    await shot('server-restarted');
  });

  await check('without streamed in the chosen Python, one notification says how to install it', async () => {
    // A Python that has no streamed: the system python3 in an isolated mode (-I ignores PYTHONPATH and user site).
    const bare = path.join(tmp, 'python-bare');
    // (pip through it only says what it would install: the test must not install anything)
    fs.writeFileSync(bare, [
      '#!/bin/sh',
      `if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then shift 2; echo "e2e: would run pip $*" | tee '${path.join(tmp, 'pip-called')}'; exit 0; fi`,
      'exec /usr/bin/env -i /usr/bin/python3 -I "$@"',
      '',
    ].join('\n'), { mode: 0o755 });
    if (spawnSync(bare, ['-c', 'import streamed'], { encoding: 'utf8' }).status === 0) throw new Error('the bare python has streamed');
    // A second workspace whose settings choose that Python, opened in a new window.
    const ws2 = path.join(tmp, 'workspace-bare');
    fs.mkdirSync(path.join(ws2, '.vscode'), { recursive: true });
    fs.copyFileSync(path.join(workspace, docName), path.join(ws2, docName));
    fs.writeFileSync(path.join(ws2, '.vscode', 'settings.json'), JSON.stringify({ 'streamed.server.python': bare }));
    await page.goto(`${base}/?folder=${encodeURIComponent(ws2)}`);
    await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
    const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: docName }).first();
    await row.waitFor({ timeout: 60000 });
    await row.click();
    const toast = page.locator('.notification-toast', { hasText: 'is not installed in' }).first();
    await toast.waitFor({ timeout: 30000 });
    const text = (await toast.innerText()).replace(/\s+/g, ' ');
    log(`  notification: ${text.slice(0, 220)}`);
    if (!text.includes(`${bare} -m pip install`)) throw new Error(`no install command in: ${text}`);
    await shot('not-installed-notification');
    await toast.locator('.monaco-button', { hasText: 'Install in Terminal' }).click();
    await page.locator('.terminal-tab, .single-terminal-tab, .tabs-list .monaco-list-row', { hasText: /Install streamed/ }).first().waitFor({ timeout: 20000 });
    const called = path.join(tmp, 'pip-called');
    await waitFor('the install command to run in the terminal', async () => fs.existsSync(called), 30000);
    log(`  terminal ran: ${fs.readFileSync(called, 'utf8').trim()}`);
    await sleep(500);
    await shot('install-terminal');
  });
} catch (e) {
  results.push({ name: 'the workbench', ok: false, error: e });
  log(`FAIL: ${e?.stack ?? e}`);
  await shot('FAILED-workbench').catch(() => undefined);
} finally {
  fs.writeFileSync(path.join(artifacts, 'browser-console.log'), consoleLines.join('\n'));
  await browser.close().catch(() => undefined);
  try {
    process.kill(-cs.pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  const serverLogs = path.join(userData, 'logs');
  if (fs.existsSync(serverLogs)) fs.cpSync(serverLogs, path.join(artifacts, 'logs'), { recursive: true });
  if (!process.env.STREAMED_E2E_KEEP) fs.rmSync(tmp, { recursive: true, force: true });
  else log(`kept ${tmp}`);
}

const failed = results.filter((r) => !r.ok);
console.log(`\ne2e: ${((Date.now() - t0) / 1000).toFixed(0)}s, artifacts in ${path.relative(process.cwd(), artifacts) || '.'}`);
for (const r of results) console.log(`  ${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.ok ? '' : ` — ${r.error?.message ?? r.error}`}`);
console.log(`${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
