#!/usr/bin/env node
// Grammar tests: unit assertions over a corpus of tricky lines (grammars/tests/unit/*.test.lgm), snapshot tests
// over our own samples (grammars/tests/snap/*.lgm) and over every examples/*.lgm of the repository (their snapshots
// live in grammars/tests/snap/examples/), a check that no example line tokenizes as invalid, that every reserved
// word of the language is highlighted as one, and that every snippet parses and highlights.
//   node scripts/grammar-tests.mjs            run: a snapshot that differs, or is missing, fails
//   node scripts/grammar-tests.mjs --update   rewrite the snapshots (then review their diff before committing)
// A snapshot is only ever written by --update: an example that changed, or a grammar that changed its scopes, fails
// until the snapshot is updated on purpose.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.resolve(here, '..');
const repo = path.resolve(ext, '..');
const grammarPath = path.join(repo, 'grammars', 'streamed.tmLanguage.json');
const testsDir = path.join(repo, 'grammars', 'tests');
const update = process.argv.includes('--update');
const bin = (name) => path.join(ext, 'node_modules', '.bin', name);

let failures = 0;
let passed = 0;
function run(label, cmd, args) {
  console.log(`\n== ${label}`);
  const r = spawnSync(cmd, args, { cwd: repo, stdio: 'inherit' });
  if (r.status !== 0) { failures++; console.error(`FAILED: ${label}`); } else { passed++; }
}

// 0. The grammar is valid JSON with the scope the extension declares.
const grammar = JSON.parse(fs.readFileSync(grammarPath, 'utf8'));
if (grammar.scopeName !== 'source.streamed') { console.error('grammar scopeName must be source.streamed'); process.exit(1); }

// 1. Unit assertions.
run('unit assertions (grammars/tests/unit)', bin('vscode-tmgrammar-test'),
  ['-g', grammarPath, path.relative(repo, path.join(testsDir, 'unit')) + '/*.test.lgm']);

// 2. Snapshots: our samples (grammars/tests/snap/*.lgm), and a digest of each example — its sections with one
//    layer of each shape (layers that differ only in numbers are dropped), so snapshots stay small. The digests are
//    derived from the examples on every run (gitignored); their snapshots are committed, and each holds the digest's
//    text line by line, so an example that changed fails here like a grammar that changed its scopes.
const exDir = path.join(repo, 'examples');
const snapDir = path.join(testsDir, 'snap');
const snapEx = path.join(snapDir, 'examples');
fs.mkdirSync(snapEx, { recursive: true });
const examples = fs.existsSync(exDir) ? fs.readdirSync(exDir).filter((f) => f.endsWith('.lgm')).sort() : [];
// Lines already seen (comments dropped, numbers erased), across all examples in order: a digest keeps the headings
// and the lines not seen before, so each snapshot holds what its example adds to the ones before it.
const seen = new Set();
function layerDigest(text) {
  const out = [];
  const shape = (l) => l.replace(/--.*$/, '').replace(/[0-9]+/g, '#').replace(/\s+/g, ' ').trim();
  let pendingHeading;
  for (const line of text.split('\n')) {
    if (/^#/.test(line)) {
      if (/^##\s*Layer\s+\d+/.test(line)) pendingHeading = line;
      else { pendingHeading = undefined; out.push(line); }
      continue;
    }
    const sh = shape(line);
    if (!sh || seen.has(sh)) continue;
    seen.add(sh);
    if (pendingHeading) { out.push(pendingHeading); pendingHeading = undefined; }
    out.push(line);
  }
  return out.join('\n') + '\n';
}
for (const f of fs.readdirSync(snapEx)) if (f.endsWith('.lgm')) fs.rmSync(path.join(snapEx, f));
for (const f of examples) fs.writeFileSync(path.join(snapEx, f), layerDigest(fs.readFileSync(path.join(exDir, f), 'utf8')));
console.log(`\nexamples found: ${examples.length}${examples.length ? ' (' + examples.join(', ') + ')' : ''}`);
// Every sample has its snapshot and every snapshot its sample (vscode-tmgrammar-snap would write a missing one and
// pass): outside --update, a missing or orphaned snapshot fails.
console.log('\n== every sample and example has its snapshot');
const orphans = [];
const missing = [];
for (const dir of [snapDir, snapEx]) {
  for (const f of fs.readdirSync(dir)) {
    if (f.endsWith('.snap') && !fs.existsSync(path.join(dir, f.replace(/\.snap$/, '')))) orphans.push(path.join(dir, f));
    if (f.endsWith('.lgm') && !fs.existsSync(path.join(dir, f + '.snap'))) missing.push(path.join(dir, f));
  }
}
if (update) {
  for (const f of orphans) { fs.rmSync(f); console.log(`removed ${path.relative(repo, f)} (its example is gone)`); }
  passed++;
} else if (orphans.length || missing.length) {
  failures++;
  for (const f of missing) console.error(`no snapshot for ${path.relative(repo, f)}`);
  for (const f of orphans) console.error(`a snapshot without its sample: ${path.relative(repo, f)}`);
  console.error('FAILED: run `npm run test:grammar -- --update` and review the snapshots it writes');
} else {
  passed++;
  console.log('every snapshot present');
}
const snapArgs = ['-s', 'source.streamed', '-g', grammarPath];
if (update) snapArgs.push('--updateSnapshot');
const rel = path.relative(repo, snapDir);
run('snapshots (grammars/tests/snap)', bin('vscode-tmgrammar-snap'), [...snapArgs, `${rel}/*.lgm`]);
if (examples.length) run('snapshots of examples/*.lgm (digests)', bin('vscode-tmgrammar-snap'), [...snapArgs, `${rel}/examples/*.lgm`]);
if (!update && failures) console.error('a snapshot differs: if the example or the grammar changed on purpose, run `npm run test:grammar -- --update` and review the diff');

// 3. No example (nor sample) tokenizes as invalid.illegal.
const require = createRequire(path.join(ext, 'node_modules', 'vscode-tmgrammar-test', 'package.json'));
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');
const wasm = fs.readFileSync(require.resolve('vscode-oniguruma').replace(/main\.js$/, 'onig.wasm'));
await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
const registry = new vsctm.Registry({
  onigLib: Promise.resolve({ createOnigScanner: (p) => new oniguruma.OnigScanner(p), createOnigString: (s) => new oniguruma.OnigString(s) }),
  loadGrammar: async (scope) => (scope === 'source.streamed' ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath) : null),
});
const g = await registry.loadGrammar('source.streamed');
console.log('\n== no invalid tokens in samples and examples');
const docs = [
  ...fs.readdirSync(path.join(testsDir, 'snap')).filter((f) => f.endsWith('.lgm')).map((f) => path.join(testsDir, 'snap', f)),
  ...examples.map((f) => path.join(exDir, f)),
];
let bad = 0;
for (const file of docs) {
  let stack = vsctm.INITIAL;
  const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/);
  lines.forEach((line, i) => {
    const r = g.tokenizeLine(line, stack);
    stack = r.ruleStack;
    for (const t of r.tokens) {
      if (t.scopes.some((s) => s.startsWith('invalid.'))) {
        bad++;
        if (bad <= 20) console.error(`${path.relative(repo, file)}:${i + 1}:${t.startIndex + 1}: invalid token '${line.slice(t.startIndex, t.endIndex)}'`);
      }
    }
  });
}
if (bad) { failures++; console.error(`FAILED: ${bad} invalid tokens`); } else { passed++; console.log(`${docs.length} documents clean`); }

// 4. Every reserved word of the language (streamed.lang.ops.KEYWORDS, the parser's own list) is highlighted as a
//    keyword, an operation, a role or an option — never as a plain name.
console.log('\n== every reserved word of streamed.lang.ops is a keyword');
const venvPython = path.join(repo, '.venv', 'bin', 'python');
const py = process.env.STREAMED_PYTHON || (fs.existsSync(venvPython) ? venvPython : 'python3');
const kw = spawnSync(py, ['-c', 'import json; from streamed.lang.ops import KEYWORDS; print(json.dumps(sorted(KEYWORDS)))'], { cwd: repo, encoding: 'utf8' });
if (kw.status !== 0) {
  failures++;
  console.error(`FAILED: streamed.lang.ops is not importable with ${py} (set STREAMED_PYTHON): ${(kw.stderr || kw.error?.message || '').trim().split('\n').pop()}`);
} else {
  const words = JSON.parse(kw.stdout);
  const plain = [];
  let stack = g.tokenizeLine('## Layer 0', vsctm.INITIAL).ruleStack;
  for (const w of words) {
    const line = `Let zz0 be ${w} of zz1.`;
    const r = g.tokenizeLine(line, stack);
    const tok = r.tokens.find((t) => t.startIndex === 11);
    const scope = tok.scopes[tok.scopes.length - 1];
    if (scope.startsWith('variable.other')) plain.push(`${w} (${scope})`);
  }
  if (plain.length) { failures++; console.error(`FAILED: reserved words highlighted as names: ${plain.join(', ')}`); }
  else { passed++; console.log(`${words.length} reserved words`); }
}

// 5. Every snippet, its placeholders at their defaults, parses without a diagnostic (the language's own parser) and
//    highlights without an invalid token: a statement inside a layer, the layer snippet as a section.
console.log('\n== every snippet parses and highlights');
const snippets = JSON.parse(fs.readFileSync(path.join(ext, 'snippets', 'streamed.json'), 'utf8'));
function expand(body) {
  const text = Array.isArray(body) ? body.join('\n') : body;
  const defaults = {};
  const first = text.replace(/\$\{(\d+):([^}]*)\}/g, (_, n, d) => (defaults[n] = d)).replace(/\$\{(\d+)\|([^,|]*)[^}]*\|\}/g, (_, n, d) => (defaults[n] = d));
  return first.replace(/\$(\d+)/g, (_, n) => defaults[n] ?? '');
}
const bodies = Object.entries(snippets).map(([name, s]) => {
  const text = expand(s.body);
  return { name, doc: `# Snippet\n${text.startsWith('## ') ? '' : '## Layer 0\n'}${text}\n` };
});
const parsed = spawnSync(py, ['-c', [
  'import json, sys',
  'from streamed.lang.parser import parse',
  'docs = json.load(sys.stdin)',
  'print(json.dumps([[d.message for d in parse(t).diagnostics] for t in docs]))',
].join('\n')], { cwd: repo, encoding: 'utf8', input: JSON.stringify(bodies.map((b) => b.doc)) });
let badSnippets = 0;
if (parsed.status !== 0) {
  badSnippets++;
  console.error(`cannot parse the snippets with ${py}: ${(parsed.stderr || '').trim().split('\n').pop()}`);
} else {
  JSON.parse(parsed.stdout).forEach((messages, i) => {
    for (const m of messages) { badSnippets++; console.error(`snippet "${bodies[i].name}": ${m}`); }
  });
}
for (const b of bodies) {
  let stack = vsctm.INITIAL;
  for (const line of b.doc.split('\n')) {
    const r = g.tokenizeLine(line, stack);
    stack = r.ruleStack;
    for (const t of r.tokens) {
      if (t.scopes.some((sc) => sc.startsWith('invalid.'))) { badSnippets++; console.error(`snippet "${b.name}": invalid token '${line.slice(t.startIndex, t.endIndex)}'`); }
    }
  }
}
if (badSnippets) { failures++; console.error(`FAILED: ${badSnippets} problems in snippets`); } else { passed++; console.log(`${bodies.length} snippets`); }

console.log(`\ngrammar: ${passed} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
