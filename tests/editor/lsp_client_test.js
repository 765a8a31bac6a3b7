#!/usr/bin/env node
// A protocol-level client of `ipu lsp` (docs/editor.md), written with
// vscode-jsonrpc, the JSON-RPC library under vscode-languageclient (the
// version editor/vscode's lockfile resolves), and started with the very
// command editor/vscode/extension.js builds from its settings. It checks:
//
//   1. the extension's manifest against its code (statically, and by calling
//      extension.js's serverCommand(); VS Code itself is not needed): the
//      activation on the `ipu` language, the settings and their defaults, the
//      commands, the pinned vscode-languageclient and the JSON-RPC version;
//   2. every request the server answers, with the expected replies: initialize,
//      didOpen -> publishDiagnostics for every script of tests/diagnostics whose
//      expectations `ipu check` reports (codes, severities, lines, columns and
//      messages of their `// expect-error:` comments), hover, definition (into a
//      user module and into the standard library), references, completion,
//      documentSymbol, formatting (the text `ipu fmt` writes), semanticTokens,
//      foldingRange, didChange -> a diagnostic -> codeAction -> the quick fix
//      applied -> no diagnostic, prepareRename and rename across two files,
//      signatureHelp, workspace/symbol, shutdown and exit (exit code 0).
//
// Usage: node tests/editor/lsp_client_test.js --modules DIR --ipu PATH
//   --modules DIR  node_modules with the packages of tests/editor/package.json
//   --ipu PATH     the ipu binary
// Exit: 0 passed, 1 failed.
'use strict';

const assert = require('assert/strict');
const cp = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { createRequire } = require('module');
const { pathToFileURL, fileURLToPath } = require('url');

const root = path.resolve(__dirname, '..', '..');
const vscodeDir = path.join(root, 'editor', 'vscode');
const args = process.argv.slice(2);
let modules = path.join(__dirname, 'node_modules');
let ipu = null;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--modules') modules = path.resolve(args[++i]);
  else if (args[i] === '--ipu') ipu = path.resolve(args[++i]);
  else {
    console.error(`lsp_client_test.js: unknown argument ${args[i]}`);
    process.exit(2);
  }
}
if (!ipu) {
  console.error('usage: lsp_client_test.js --modules DIR --ipu PATH');
  process.exit(2);
}
const load = createRequire(path.join(modules, 'noop.js'));
const rpc = load('vscode-jsonrpc/node');
const extension = require(path.join(vscodeDir, 'extension.js'));

// ----------------------------------------------------------------- the runner
let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n     ${String(e && e.stack ? e.stack : e).split('\n').join('\n     ')}`);
  }
}

// -------------------------------------------- 1. the extension's manifest and code
async function checkExtension() {
  const pkg = JSON.parse(fs.readFileSync(path.join(vscodeDir, 'package.json'), 'utf8'));
  const lock = JSON.parse(fs.readFileSync(path.join(vscodeDir, 'package-lock.json'), 'utf8'));
  const source = fs.readFileSync(path.join(vscodeDir, 'extension.js'), 'utf8');

  await check('extension: `main` is extension.js, activated on the language it serves', () => {
    assert.equal(path.resolve(vscodeDir, pkg.main), path.join(vscodeDir, 'extension.js'));
    assert.deepEqual(pkg.activationEvents, [`onLanguage:${extension.LANGUAGE}`]);
    const lang = pkg.contributes.languages.find((l) => l.id === extension.LANGUAGE);
    assert.ok(lang, `no contributes.languages entry with id ${extension.LANGUAGE}`);
    assert.deepEqual(lang.extensions, ['.ipu']);
    assert.equal(typeof extension.activate, 'function');
    assert.equal(typeof extension.deactivate, 'function');
    // The client's documents are that language's.
    assert.match(source, /documentSelector:\s*\[\s*\{ scheme: 'file', language: LANGUAGE \}/);
  });

  await check('extension: the settings package.json declares are the ones extension.js reads, same defaults', () => {
    const props = pkg.contributes.configuration.properties;
    assert.deepEqual(Object.keys(props).sort(), Object.keys(extension.SETTINGS).sort());
    for (const [key, value] of Object.entries(extension.SETTINGS)) {
      assert.deepEqual(props[key].default, value, `default of ${key}`);
      assert.equal(props[key].type, Array.isArray(value) ? 'array' : typeof value, `type of ${key}`);
    }
    // vscode-languageclient reads `<client id>.trace.server` by itself.
    assert.ok(`${extension.CLIENT_ID}.trace.server` in props);
    assert.deepEqual(props['ipu.trace.server'].enum, ['off', 'messages', 'verbose']);
    // A change of ipu.server.* restarts the server.
    assert.match(source, /affectsConfiguration\('ipu\.server'\)/);
  });

  await check('extension: the commands package.json declares are the ones extension.js registers', () => {
    const declared = pkg.contributes.commands.map((c) => c.command).sort();
    const registered = [...source.matchAll(/registerCommand\('([^']+)'/g)].map((m) => m[1]).sort();
    assert.deepEqual(declared, [...extension.COMMANDS].sort());
    assert.deepEqual(registered, declared);
    for (const c of pkg.contributes.commands) assert.equal(c.category, 'IPU');
  });

  await check('extension: vscode-languageclient pinned in package.json and its lockfile, VS Code engine as it needs', () => {
    const pinned = pkg.dependencies['vscode-languageclient'];
    assert.match(pinned, /^\d+\.\d+\.\d+$/, 'an exact version');
    assert.equal(lock.packages[''].dependencies['vscode-languageclient'], pinned);
    const client = lock.packages['node_modules/vscode-languageclient'];
    assert.equal(client.version, pinned);
    assert.equal(pkg.engines.vscode, client.engines.vscode, 'the extension needs the VS Code the client needs');
    assert.match(source, /require\('vscode-languageclient\/node'\)/);
    // This test speaks the JSON-RPC of the extension's client.
    const jsonrpc = lock.packages['node_modules/vscode-jsonrpc'].version;
    assert.equal(load('vscode-jsonrpc/package.json').version, jsonrpc);
  });

  await check('extension: serverCommand() turns the settings into `PATH lsp ARGS`', () => {
    const c = extension.serverCommand;
    assert.deepEqual(c({}, undefined), { command: 'ipu', args: ['lsp'] });
    assert.deepEqual(c({ 'ipu.server.path': '  ', 'ipu.server.args': [] }, '/w'), { command: 'ipu', args: ['lsp'] });
    assert.deepEqual(c({ 'ipu.server.path': 'ipu-dev' }, '/w'), { command: 'ipu-dev', args: ['lsp'] });
    assert.deepEqual(c({ 'ipu.server.path': 'build/ipu' }, '/w'), { command: '/w/build/ipu', args: ['lsp'] });
    assert.deepEqual(c({ 'ipu.server.path': '${workspaceFolder}/build/ipu' }, '/w'),
                     { command: '/w/build/ipu', args: ['lsp'] });
    assert.deepEqual(c({ 'ipu.server.path': '~/bin/ipu', 'ipu.server.args': ['--stdlib-dir', '~/std'] }, '/w'),
                     { command: path.join(os.homedir(), 'bin/ipu'), args: ['lsp', '--stdlib-dir', path.join(os.homedir(), 'std')] });
    assert.deepEqual(c({ 'ipu.server.path': '/opt/ipu/bin/ipu', 'ipu.server.args': 'not a list' }, '/w'),
                     { command: '/opt/ipu/bin/ipu', args: ['lsp'] });
  });
}

// ------------------------------------------------------------ the protocol client
class Client {
  constructor(command, args, cwd) {
    // As vscode-languageclient starts an Executable without a transport: stdio.
    this.process = cp.spawn(command, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    this.stderr = '';
    this.process.stderr.on('data', (d) => { this.stderr += d; });
    this.exited = new Promise((resolve) => this.process.on('exit', (code) => resolve(code)));
    this.connection = rpc.createMessageConnection(new rpc.StreamMessageReader(this.process.stdout),
                                                  new rpc.StreamMessageWriter(this.process.stdin));
    this.published = new Map();  // uri -> [params...]
    this.waiters = [];
    this.connection.onNotification('textDocument/publishDiagnostics', (params) => {
      if (!this.published.has(params.uri)) this.published.set(params.uri, []);
      this.published.get(params.uri).push(params);
      this.waiters = this.waiters.filter((w) => !w());
    });
    this.connection.listen();
  }
  request(method, params, ms = 10000) {
    return within(this.connection.sendRequest(method, params), ms, method);
  }
  notify(method, params) {
    return this.connection.sendNotification(method, params);
  }
  // The diagnostics published for uri at version (the first such).
  diagnostics(uri, version, ms = 10000) {
    const find = () => (this.published.get(uri) || []).find((p) => p.version === version);
    const found = find();
    if (found) return Promise.resolve(found);
    return within(new Promise((resolve) => {
      this.waiters.push(() => {
        const p = find();
        if (p) resolve(p);
        return p !== undefined;
      });
    }), ms, `publishDiagnostics for ${path.basename(uri)} version ${version}`);
  }
}

function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer to ${what} in ${ms} ms`)), ms); }),
  ]);
}

const uriOf = (file) => pathToFileURL(file).href;
const pos = (line, character) => ({ line, character });
const range = (l1, c1, l2, c2) => ({ start: pos(l1, c1), end: pos(l2, c2) });

// UTF-16 offset of a position in text (lines split on \n; the scripts here use \n).
function offsetAt(text, p) {
  const lines = text.split('\n');
  let off = 0;
  for (let i = 0; i < p.line; i++) off += lines[i].length + 1;
  return off + p.character;
}
function applyEdits(text, edits) {
  const sorted = [...edits].sort((a, b) => offsetAt(text, b.range.start) - offsetAt(text, a.range.start));
  for (const e of sorted) {
    text = text.slice(0, offsetAt(text, e.range.start)) + e.newText + text.slice(offsetAt(text, e.range.end));
  }
  return text;
}
function textAt(text, r) {
  return text.slice(offsetAt(text, r.start), offsetAt(text, r.end));
}

// ----------------------------------------- 2a. every diagnostics script, as opened
// The `expect-error` / `expect-warning` comments of tests/diagnostics (the syntax
// of tests/script_tests.cpp). Scripts expecting what only estimating or running
// finds (cost-model errors IPU3xxx, hooks failing as they run IPU4002+, emulator
// errors IPU5xxx) are not what `ipu check`, hence the server, reports.
function expectations(text) {
  const re = /(?:\/\/|--)\s*expect-(error|warning):\s*(IPU\d{4})(?:\s+@(\d+)(?::(\d+))?)?(?:\s+"([^"]*)")?/;
  const out = [];
  text.split('\n').forEach((line, i) => {
    const m = re.exec(line);
    if (m) {
      out.push({ error: m[1] === 'error', code: m[2], line: m[3] ? Number(m[3]) : i + 1,
                 column: m[4] ? Number(m[4]) : 0, substring: m[5] || '' });
    }
  });
  return out;
}
const checkTime = (e) => !(e.code.startsWith('IPU3') || (e.code.startsWith('IPU4') && e.code !== 'IPU4001') ||
                           (e.error && e.code.startsWith('IPU5')));

async function checkDiagnosticsScripts(client) {
  const dir = path.join(root, 'tests', 'diagnostics');
  const scripts = fs.readdirSync(dir).filter((f) => f.endsWith('.ipu')).sort();
  let opened = 0;
  let matched = 0;
  const problems = [];
  for (const name of scripts) {
    const file = path.join(dir, name);
    const bytes = fs.readFileSync(file);
    const text = bytes.toString('utf8');
    const expected = expectations(text);
    if (expected.length === 0 || !expected.every(checkTime)) continue;
    // A client sends text as a JSON string: it cannot send bytes that are not UTF-8.
    if (expected.some((e) => e.code === 'IPU0006')) continue;
    const uri = uriOf(file);
    client.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'ipu', version: 1, text } });
    const own = (await client.diagnostics(uri, 1)).diagnostics;
    opened++;
    // What was published for the other files this script reads (an imported module's
    // errors, a Lua file's) follows the script's own: a request answered after them
    // (the server answers in order) makes sure they are here.
    await client.request('textDocument/documentSymbol', { textDocument: { uri } });
    const others = [];
    for (const [u, list] of client.published) if (u !== uri) others.push(...list[list.length - 1].diagnostics);
    const lines = text.split('\n');
    const used = new Set();
    for (const e of expected) {
      // An `expect-warning` is any diagnostic that is not an error (a warning, or a note: information).
      const fits = (d, here) => d.code === e.code && (d.severity === 1) === e.error && d.source === 'ipu' &&
          d.message.includes(e.substring) && (!here || d.range.start.line === e.line - 1) &&
          (!here || e.column === 0 ||
           d.range.start.character === Buffer.from(lines[e.line - 1], 'utf8').subarray(0, e.column - 1).toString('utf8').length);
      let d = own.find((x) => !used.has(x) && fits(x, true));
      if (d) used.add(d);
      else d = others.find((x) => fits(x, false));
      if (d) matched++;
      else problems.push(`${name}: expected ${e.error ? 'error' : 'warning'} ${e.code} at line ${e.line}` +
                         `${e.column ? ':' + e.column : ''} "${e.substring}"; published: ${JSON.stringify(own)}`);
    }
    for (const d of own) {
      if (!used.has(d)) problems.push(`${name}: unexpected diagnostic ${JSON.stringify(d)}`);
      const { start, end } = d.range;
      if (end.line < start.line || (end.line === start.line && end.character < start.character)) {
        problems.push(`${name}: range ends before it starts: ${JSON.stringify(d.range)}`);
      }
    }
    client.notify('textDocument/didClose', { textDocument: { uri } });
  }
  assert.deepEqual(problems, []);
  assert.ok(opened >= 80, `only ${opened} diagnostics scripts opened`);
  return { opened, matched };
}

// ------------------------------------------------ 2b. a workspace of two files
const WIDTHS = '// The hidden width of the models in this folder.\nlet width = 1024\n';
const MAIN = `import "std/pods"
import "std/models/bert"
import "lib/widths"

// Sixteen heads of 64.
let heads = width / 64
model large = bert(layers: 24, hidden: width, heads: heads)

mapping pod16 for large on POD16 {
  pipeline: balanced(4)
  replicas: 4
  recompute: every_layer
}
`;

async function checkWorkspace(client, ws, stdlib) {
  const main = path.join(ws, 'main.ipu');
  const widths = path.join(ws, 'lib', 'widths.ipu');
  const uri = uriOf(main);
  const widthsUri = uriOf(widths);
  const doc = { uri };
  let text = MAIN;
  let version = 1;

  await check('didOpen: a script that checks publishes no diagnostic', async () => {
    client.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'ipu', version, text } });
    const p = await client.diagnostics(uri, 1);
    assert.deepEqual(p.diagnostics, []);
  });

  await check('hover: a name imported from a user module: its declaration, value, type and doc comment', async () => {
    const h = await client.request('textDocument/hover', { textDocument: doc, position: pos(5, 13) });
    assert.equal(h.contents.kind, 'markdown');
    assert.deepEqual(h.range, range(5, 12, 5, 17));
    const v = h.contents.value;
    assert.ok(v.startsWith('```ipu\nlet width = 1024\n```'), v);
    assert.ok(v.includes('**type** number · **value** `1024`'), v);
    assert.ok(v.includes('The hidden width of the models in this folder.'), v);
    assert.ok(v.includes(`${widths}:2`), v);
  });

  await check('hover: a field: its record, type, default and doc', async () => {
    const h = await client.request('textDocument/hover', { textDocument: doc, position: pos(11, 4) });
    assert.deepEqual(h.range, range(11, 2, 11, 11));
    assert.equal(h.contents.value,
                 '**recompute** · field of `mapping`\n\none of `none`, `every_layer` or `stage_inputs` · default: none\n\n' +
                 'recomputation: keep only checkpoints and recompute activations in the backward pass');
  });

  await check('definition: into the imported user module', async () => {
    const d = await client.request('textDocument/definition', { textDocument: doc, position: pos(6, 41) });
    const loc = Array.isArray(d) ? d[0] : d;
    assert.equal(loc.uri, widthsUri);
    assert.deepEqual(loc.range, range(1, 4, 1, 9));
  });

  await check('definition: into the standard library, written read-only under --stdlib-dir', async () => {
    const d = await client.request('textDocument/definition', { textDocument: doc, position: pos(6, 16) });
    const loc = Array.isArray(d) ? d[0] : d;
    const file = fileURLToPath(loc.uri);
    assert.ok(file.startsWith(stdlib + path.sep), file);
    assert.ok(file.endsWith(path.join('std', 'models', 'bert.ipu')), file);
    const stdText = fs.readFileSync(file, 'utf8');
    assert.equal(stdText, fs.readFileSync(path.join(root, 'stdlib', 'models', 'bert.ipu'), 'utf8'));
    assert.equal(textAt(stdText, loc.range), 'bert');
    assert.match(stdText.split('\n')[loc.range.start.line], /^model bert\(/);
    assert.equal(fs.statSync(file).mode & 0o222, 0, 'read-only');
  });

  await check('references: a name across the two files, with and without its declaration', async () => {
    const withDecl = await client.request('textDocument/references',
                                          { textDocument: doc, position: pos(6, 41), context: { includeDeclaration: true } });
    const key = (l) => `${l.uri} ${l.range.start.line}:${l.range.start.character}-${l.range.end.line}:${l.range.end.character}`;
    assert.deepEqual(withDecl.map(key).sort(),
                     [`${widthsUri} 1:4-1:9`, `${uri} 5:12-5:17`, `${uri} 6:39-6:44`].sort());
    const without = await client.request('textDocument/references',
                                         { textDocument: doc, position: pos(5, 5), context: { includeDeclaration: false } });
    assert.deepEqual(without.map(key), [`${uri} 6:53-6:58`]);
  });

  await check('completion: after `recompute:`, the enumeration members first, then names in scope', async () => {
    const c = await client.request('textDocument/completion', { textDocument: doc, position: pos(11, 13) });
    const items = Array.isArray(c) ? c : c.items;
    const labels = items.map((i) => i.label);
    assert.deepEqual(labels.slice(0, 3), ['none', 'every_layer', 'stage_inputs']);
    for (const i of items.slice(0, 3)) assert.equal(i.kind, 20 /* EnumMember */);
    for (const name of ['heads', 'large', 'pod16', 'POD16']) assert.ok(labels.includes(name), name);
    assert.deepEqual(items[1].textEdit, { range: range(11, 13, 11, 13), newText: 'every_layer' });
  });

  await check('completion: in a mapping block, the fields not written yet, with their docs', async () => {
    // A new line `  opt` inside the mapping.
    text = applyEdits(text, [{ range: range(11, 24, 11, 24), newText: '\n  opt' }]);
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version },
                                               contentChanges: [{ range: range(11, 24, 11, 24), text: '\n  opt' }] });
    const c = await client.request('textDocument/completion', { textDocument: doc, position: pos(12, 5) });
    const items = Array.isArray(c) ? c : c.items;
    const labels = items.map((i) => i.label);
    const state = items.find((i) => i.label === 'optimizer_state');
    assert.ok(state, labels.join(' '));
    assert.equal(state.kind, 5 /* Field */);
    assert.deepEqual(state.textEdit, { range: range(12, 2, 12, 5), newText: 'optimizer_state: ' });
    assert.match(state.documentation.value, /where optimizer state/);
    for (const written of ['replicas', 'recompute', 'pipeline']) assert.ok(!labels.includes(written), written);
    // Undo.
    text = applyEdits(text, [{ range: range(11, 24, 12, 5), newText: '' }]);
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version },
                                               contentChanges: [{ range: range(11, 24, 12, 5), text: '' }] });
    assert.equal(text, MAIN);
    assert.deepEqual((await client.diagnostics(uri, version)).diagnostics, []);
  });

  await check('documentSymbol: imports, lets, declarations, with the mapping\'s fields nested', async () => {
    const s = await client.request('textDocument/documentSymbol', { textDocument: doc });
    assert.deepEqual(s.map((x) => [x.name, x.kind]), [['std/pods', 2], ['std/models/bert', 2], ['lib/widths', 2],
                                                       ['heads', 14], ['large', 5], ['pod16', 19]]);
    const mapping = s[5];
    assert.equal(mapping.detail, 'mapping for large on POD16');
    assert.deepEqual(mapping.range, range(8, 0, 12, 1));
    assert.deepEqual(mapping.selectionRange, range(8, 8, 8, 13));
    assert.deepEqual(mapping.children.map((x) => [x.name, x.detail]),
                     [['pipeline', 'balanced(4)'], ['replicas', '4'], ['recompute', 'every_layer']]);
  });

  await check('foldingRange: the mapping\'s braces and the imports', async () => {
    const f = await client.request('textDocument/foldingRange', { textDocument: doc });
    const key = (r) => `${r.startLine}-${r.endLine}${r.kind ? ' ' + r.kind : ''}`;
    assert.deepEqual(f.map(key).sort(), ['0-2 imports', '8-11'].sort());
  });

  await check('semanticTokens/full: keywords, strings, and names by what declares them', async () => {
    const init = client.capabilities.semanticTokensProvider.legend;
    const s = await client.request('textDocument/semanticTokens/full', { textDocument: doc });
    assert.equal(s.data.length % 5, 0);
    const tokens = [];
    let line = 0;
    let ch = 0;
    for (let i = 0; i < s.data.length; i += 5) {
      const [dl, dc, len, type, mods] = s.data.slice(i, i + 5);
      line += dl;
      ch = dl === 0 ? ch + dc : dc;
      const modifiers = init.tokenModifiers.filter((_, bit) => mods & (1 << bit));
      tokens.push(`${line}:${ch} ${textAt(text, range(line, ch, line, ch + len))} ${init.tokenTypes[type]}` +
                  (modifiers.length ? ` ${modifiers.join('|')}` : ''));
    }
    for (const t of ['0:0 import keyword', '0:7 "std/pods" string', '4:0 // Sixteen heads of 64. comment',
                     '5:4 heads variable declaration|readonly', '5:12 width variable readonly', '5:20 64 number',
                     '6:6 large class declaration', '6:14 bert function defaultLibrary',
                     '6:19 layers parameter defaultLibrary', '6:39 width variable readonly', '8:18 large class',
                     '8:8 pod16 struct declaration', '8:27 POD16 struct defaultLibrary', '9:12 balanced function defaultLibrary', '10:2 replicas property',
                     '11:13 every_layer enumMember']) {
      assert.ok(tokens.includes(t), `no token ${t} in:\n${tokens.join('\n')}`);
    }
  });

  await check('signatureHelp: inside a model call, its parameters, the one being written active', async () => {
    const h = await client.request('textDocument/signatureHelp', { textDocument: doc, position: pos(6, 35) });
    assert.equal(h.signatures.length, 1);
    assert.equal(h.signatures[0].label,
                 'bert(layers: int, hidden: int, heads: int, ffn: int = 4 * hidden, vocab: int = 30522, positions: int = 512)');
    assert.equal(h.activeParameter, 1);
    assert.equal(h.signatures[0].parameters[1].label, 'hidden: int');
    assert.match(h.signatures[0].documentation.value, /^BERT with MLM and NSP heads/);
  });

  await check('formatting: the edits give the text `ipu fmt` writes', async () => {
    // Unformatted on purpose: spaces lost and added, a field indented by four.
    const messy = MAIN.replace('let heads = width / 64', 'let heads=width/64').replace('  replicas: 4', '    replicas:4');
    const change = { range: range(0, 0, text.split('\n').length - 1, 0), text: messy };
    text = messy;
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version }, contentChanges: [change] });
    const edits = await client.request('textDocument/formatting',
                                       { textDocument: doc, options: { tabSize: 2, insertSpaces: true } });
    assert.ok(edits.length > 0);
    const formatted = applyEdits(text, edits);
    const tmp = path.join(ws, 'fmt-expected.ipu');
    fs.writeFileSync(tmp, messy);
    const fmt = cp.spawnSync(ipu, ['fmt', tmp, '--stdout'], { encoding: 'utf8' });
    fs.unlinkSync(tmp);
    assert.equal(fmt.status, 0, fmt.stderr);
    assert.equal(formatted, fmt.stdout);
    assert.notEqual(formatted, messy);
    assert.ok(formatted.includes('let heads = width / 64\n') && formatted.includes('\n  replicas: 4\n'), formatted);
    // Back to the script (whose own format is a blank line more: `ipu fmt` separates a let from a model).
    text = MAIN;
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version },
                                               contentChanges: [{ text: MAIN }] });
    assert.deepEqual((await client.diagnostics(uri, version)).diagnostics, []);
  });

  await check('rangeFormatting: only the lines of the range change', async () => {
    const messy = MAIN.replace('let heads = width / 64', 'let heads=width/64').replace('  replicas: 4', '    replicas:4');
    text = messy;
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version }, contentChanges: [{ text }] });
    const edits = await client.request('textDocument/rangeFormatting',
                                       { textDocument: doc, range: range(9, 0, 11, 0), options: { tabSize: 2, insertSpaces: true } });
    for (const e of edits) assert.ok(e.range.start.line >= 9 && e.range.end.line <= 11, JSON.stringify(e));
    assert.equal(applyEdits(text, edits), MAIN.replace('let heads = width / 64', 'let heads=width/64'));
    text = MAIN;
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version }, contentChanges: [{ text }] });
    assert.deepEqual((await client.diagnostics(uri, version)).diagnostics, []);
  });

  await check('didChange -> publishDiagnostics -> codeAction: the "did you mean" quick fix, applied, clears it', async () => {
    // `every_layer` loses its last letter: an incremental edit.
    text = applyEdits(text, [{ range: range(11, 22, 11, 23), newText: '' }]);
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version },
                                               contentChanges: [{ range: range(11, 22, 11, 23), text: '' }] });
    const p = await client.diagnostics(uri, version);
    assert.equal(p.diagnostics.length, 1, JSON.stringify(p.diagnostics));
    const d = p.diagnostics[0];
    assert.equal(d.code, 'IPU1003');
    assert.equal(d.severity, 1);
    assert.deepEqual(d.range, range(11, 13, 11, 23));
    assert.equal(textAt(text, d.range), 'every_layr');
    assert.equal(d.message, '`recompute` expects one of `none`, `every_layer` or `stage_inputs`, found `every_layr`\n' +
                            'help: did you mean `every_layer`?');
    const actions = await client.request('textDocument/codeAction',
                                         { textDocument: doc, range: d.range, context: { diagnostics: [d] } });
    assert.equal(actions.length, 1, JSON.stringify(actions));
    const a = actions[0];
    assert.equal(a.kind, 'quickfix');
    assert.match(a.title, /every_layer/);
    assert.deepEqual(Object.keys(a.edit.changes), [uri]);
    const edits = a.edit.changes[uri];
    assert.deepEqual(edits, [{ range: range(11, 13, 11, 23), newText: 'every_layer' }]);
    text = applyEdits(text, edits);
    assert.equal(text, MAIN);
    client.notify('textDocument/didChange', { textDocument: { uri, version: ++version },
                                               contentChanges: edits.map((e) => ({ range: e.range, text: e.newText })) });
    assert.deepEqual((await client.diagnostics(uri, version)).diagnostics, []);
  });

  await check('codeAction: a standard-library name without its import gets "add import"', async () => {
    const other = path.join(ws, 'missing.ipu');
    const otherUri = uriOf(other);
    const src = 'import "std/pods"\n\nmapping m for bert_large on POD16 {\n  pipeline: balanced(4)\n}\n';
    client.notify('textDocument/didOpen', { textDocument: { uri: otherUri, languageId: 'ipu', version: 1, text: src } });
    const p = await client.diagnostics(otherUri, 1);
    const d = p.diagnostics.find((x) => x.code === 'IPU1001');
    assert.ok(d, JSON.stringify(p.diagnostics));
    assert.deepEqual(d.range, range(2, 14, 2, 24));
    const actions = await client.request('textDocument/codeAction',
                                         { textDocument: { uri: otherUri }, range: d.range, context: { diagnostics: [d] } });
    const add = actions.find((a) => a.title.includes('std/models/bert'));
    assert.ok(add, JSON.stringify(actions));
    assert.deepEqual(add.edit.changes[otherUri], [{ range: range(1, 0, 1, 0), newText: 'import "std/models/bert"\n' }]);
    client.notify('textDocument/didChange', { textDocument: { uri: otherUri, version: 2 },
                                               contentChanges: [{ range: range(1, 0, 1, 0), text: 'import "std/models/bert"\n' }] });
    assert.deepEqual((await client.diagnostics(otherUri, 2)).diagnostics.filter((x) => x.code === 'IPU1001'), []);
    client.notify('textDocument/didClose', { textDocument: { uri: otherUri } });
  });

  await check('prepareRename and rename: a name and its uses across the two files; a keyword refused', async () => {
    const prep = await client.request('textDocument/prepareRename', { textDocument: doc, position: pos(5, 13) });
    assert.deepEqual(prep, { range: range(5, 12, 5, 17), placeholder: 'width' });
    const edit = await client.request('textDocument/rename', { textDocument: doc, position: pos(5, 13), newName: 'hidden_width' });
    assert.deepEqual(Object.keys(edit.changes).sort(), [uri, widthsUri].sort());
    assert.equal(applyEdits(WIDTHS, edit.changes[widthsUri]), WIDTHS.replace('let width', 'let hidden_width'));
    assert.equal(applyEdits(text, edit.changes[uri]),
                 text.replace('heads = width', 'heads = hidden_width').replace('hidden: width', 'hidden: hidden_width'));
    await assert.rejects(client.request('textDocument/rename', { textDocument: doc, position: pos(5, 13), newName: 'model' }),
                         (e) => e.code === -32803);
  });

  await check('workspace/symbol: the declarations of the open documents and their modules, by subsequence', async () => {
    const s = await client.request('workspace/symbol', { query: 'wdh' });
    assert.deepEqual(s.map((x) => [x.name, x.location.uri, x.location.range.start.line]), [['width', widthsUri, 1]]);
  });

  await check('a request for a method the server does not have: MethodNotFound', async () => {
    await assert.rejects(client.request('textDocument/noSuchRequest', { textDocument: doc }), (e) => e.code === -32601);
  });
}

// ------------------------------ 2c. what the plan shows: code lens, inlay hints
// On a copy of examples/bert_large_pod16.ipu (a training with two phases on the
// mapping `pod16`, whose pipeline has four stages; `pod16_deep` unused).
async function checkPlanFeatures(client, ws) {
  const file = path.join(ws, 'pod16.ipu');
  const text = fs.readFileSync(path.join(root, 'examples', 'bert_large_pod16.ipu'), 'utf8');
  fs.writeFileSync(file, text);
  const uri = uriOf(file);
  const lines = text.split('\n');
  const lineOf = (prefix) => lines.findIndex((l) => l.startsWith(prefix));
  client.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'ipu', version: 1, text } });
  assert.deepEqual((await client.diagnostics(uri, 1)).diagnostics, []);

  await check('codeLens: above each mapping, per phase of the training using it: verdict, peak memory, throughput', async () => {
    const lenses = await client.request('textDocument/codeLens', { textDocument: { uri } });
    const at = (line) => lenses.filter((l) => l.range.start.line === line).map((l) => l.command.title);
    const pod16 = at(lineOf('mapping pod16 for'));
    assert.equal(pod16.length, 2, JSON.stringify(lenses));
    pod16.forEach((title, i) => {
      assert.match(title, new RegExp(`^\`pretrain\\.${['one', 'two'][i]}\`: fits · peak [\\d.]+ MB \\(\\d+%\\) ` +
                                     'on IPU \\d+ · [\\d,]+ samples/s'));
    });
    assert.deepEqual(at(lineOf('mapping pod16_deep')), ['no training uses `pod16_deep`']);
    assert.equal(lenses.length, 3);
  });

  await check('inlayHint: after each pipeline stage, its memory and FLOP shares', async () => {
    const hints = await client.request('textDocument/inlayHint',
                                       { textDocument: { uri }, range: range(0, 0, lines.length, 0) });
    const stages = lines.map((l, i) => [l, i]).filter(([l]) => /^    ipu \d: /.test(l)).map(([, i]) => i);
    assert.equal(stages.length, 4);
    assert.deepEqual(hints.map((h) => h.position.line), stages);
    let flops = 0;
    for (const h of hints) {
      const line = lines[h.position.line];
      // At the end of the stage's layers, before a comment.
      assert.equal(line.slice(0, h.position.character).trimEnd().length, h.position.character, line);
      assert.match(line.slice(h.position.character), /^(\s*\/\/.*)?$/);
      const label = typeof h.label === 'string' ? h.label : h.label.map((part) => part.value).join('');
      const m = /^[\d.]+ MB \((\d+)%\) · (\d+)% of FLOPs/.exec(label);
      assert.ok(m, label);
      assert.ok(Number(m[1]) <= 100, label);
      flops += Number(m[2]);
    }
    assert.ok(flops >= 97 && flops <= 103, `the stages' FLOP shares add up to ${flops}%`);
  });
  client.notify('textDocument/didClose', { textDocument: { uri } });
}

async function main() {
  await checkExtension();

  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'ipu-lsp-client-'));
  const stdlib = path.join(ws, 'stdlib');
  fs.mkdirSync(path.join(ws, 'lib'));
  fs.writeFileSync(path.join(ws, 'lib', 'widths.ipu'), WIDTHS);
  fs.writeFileSync(path.join(ws, 'main.ipu'), MAIN);
  const { command, args: serverArgs } = extension.serverCommand(
      { 'ipu.server.path': ipu, 'ipu.server.args': ['--stdlib-dir', '${workspaceFolder}/stdlib'] }, ws);
  assert.deepEqual(serverArgs, ['lsp', '--stdlib-dir', stdlib]);
  const client = new Client(command, serverArgs, ws);
  try {
    await check('initialize: the capabilities of every request below, UTF-16 positions, incremental sync', async () => {
      const r = await client.request('initialize', {
        processId: process.pid, rootUri: uriOf(ws), workspaceFolders: [{ uri: uriOf(ws), name: 'ws' }],
        capabilities: { general: { positionEncodings: ['utf-16'] },
                        textDocument: { completion: { completionItem: { snippetSupport: true } } } },
      });
      const c = r.capabilities;
      client.capabilities = c;
      assert.equal(r.serverInfo.name, 'ipu');
      assert.equal(c.positionEncoding, 'utf-16');
      assert.deepEqual(c.textDocumentSync, { openClose: true, change: 2 });
      for (const p of ['hoverProvider', 'definitionProvider', 'referencesProvider', 'documentSymbolProvider',
                       'documentFormattingProvider', 'documentRangeFormattingProvider', 'workspaceSymbolProvider',
                       'foldingRangeProvider']) {
        assert.equal(c[p], true, p);
      }
      assert.deepEqual(c.renameProvider, { prepareProvider: true });
      assert.ok(c.codeActionProvider.codeActionKinds.includes('quickfix'), JSON.stringify(c.codeActionProvider));
      assert.ok(c.completionProvider.triggerCharacters.includes(':'));
      assert.deepEqual(c.signatureHelpProvider.triggerCharacters, ['(', ',']);
      assert.equal(c.semanticTokensProvider.full, true);
      assert.ok(c.codeLensProvider && c.inlayHintProvider, 'code lens and inlay hints');
      assert.ok(c.semanticTokensProvider.legend.tokenTypes.includes('enumMember'));
      client.notify('initialized', {});
    });
    if (failed > 0) throw new Error('no session to test: initialize failed');
    await check('didOpen -> publishDiagnostics: every diagnostics script, its expected codes at their lines', async () => {
      const { opened, matched } = await checkDiagnosticsScripts(client);
      console.log(`     (${opened} scripts opened, ${matched} expected diagnostics published)`);
    });
    await checkWorkspace(client, ws, stdlib);
    await checkPlanFeatures(client, ws);
    await check('shutdown then exit: a null result, exit code 0', async () => {
      assert.equal(await client.request('shutdown', null), null);
      client.notify('exit');
      assert.equal(await within(client.exited, 10000, 'the server to exit'), 0);
    });
  } catch (e) {
    failed++;
    console.log(`FAIL ${e.message}`);
  } finally {
    client.process.kill();
    fs.rmSync(ws, { recursive: true, force: true });
  }
  if (client.stderr.trim() !== '') console.log(`server's standard error:\n${client.stderr}`);
  console.log(`lsp_client_test: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
