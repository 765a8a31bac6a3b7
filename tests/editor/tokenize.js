#!/usr/bin/env node
// Tokenizes .ipu files with the TextMate engine VS Code uses (vscode-textmate +
// vscode-oniguruma) and editor/vscode/syntaxes/ipu.tmLanguage.json, with VS Code's
// own Lua grammar (from tm-grammars) for the embedded `lua` bodies, then:
//
//   1. compares the scopes of every example, stdlib file and test fixture with its
//      golden file in tests/editor/goldens/ (`--update` rewrites the goldens);
//   2. asserts that no token of a valid script (examples, stdlib, tests/scripts,
//      tests/diagnostics, tests/editor/fixtures) is in an `invalid.*` scope, and
//      that the diagnostics scripts whose error the grammar can see (IPU0002 an
//      unexpected character, IPU0012 a bad escape, IPU1017 an unknown unit) do get
//      an `invalid.*` token on the line of the expected error.
//
// Usage: node tests/editor/tokenize.js [--modules DIR] [--update] [--print FILE]
//   --modules DIR  the node_modules holding the packages of tests/editor/package.json
//                  (default: tests/editor/node_modules, made by `npm ci` there)
//   --update       rewrite the goldens instead of comparing
//   --print FILE   print the tokens of one file and exit
//   --ipu PATH     also check the snippets of editor/vscode: every snippet expanded with
//                  its default placeholders (and each choice of a `${1|a,b|}` in turn),
//                  put together into scripts that `PATH check` must accept and whose
//                  tokens must not be invalid.*; and that the `$ipu` problem matcher of
//                  package.json reads the diagnostics `PATH check` prints
//
// Always: the regular expressions of language-configuration.json compile, and its
// indentation rules agree with the indentation of the canonical files (examples and
// stdlib, kept formatted by `ipu fmt`).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { createRequire } = require('module');

const root = path.resolve(__dirname, '..', '..');
const args = process.argv.slice(2);
let modules = path.join(__dirname, 'node_modules');
let update = false;
let printFile = null;
let ipu = null;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--modules') modules = path.resolve(args[++i]);
  else if (args[i] === '--ipu') ipu = path.resolve(args[++i]);
  else if (args[i] === '--update') update = true;
  else if (args[i] === '--print') printFile = path.resolve(args[++i]);
  else {
    console.error(`tokenize.js: unknown argument ${args[i]}`);
    process.exit(2);
  }
}

const load = createRequire(path.join(modules, 'noop.js'));
let vsctm, oniguruma;
try {
  vsctm = load('vscode-textmate');
  oniguruma = load('vscode-oniguruma');
} catch (e) {
  console.error(`tokenize.js: cannot load vscode-textmate/vscode-oniguruma from ${modules}: ${e.message}`);
  console.error('  install them with: (cd tests/editor && npm ci)');
  process.exit(1);
}

const grammarFiles = {
  'source.ipu': path.join(root, 'editor', 'vscode', 'syntaxes', 'ipu.tmLanguage.json'),
  'source.lua': load.resolve('tm-grammars/grammars/lua.json'),
};

async function makeGrammar() {
  const wasm = fs.readFileSync(path.join(path.dirname(load.resolve('vscode-oniguruma')), 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      const file = grammarFiles[scopeName];
      if (!file) return null;  // other embedded languages (the Lua grammar includes source.c) stay plain
      return vsctm.parseRawGrammar(fs.readFileSync(file, 'utf8'), file);
    },
  });
  const grammar = await registry.loadGrammar('source.ipu');
  if (!grammar) throw new Error('cannot load source.ipu');
  return grammar;
}

// Every token of a file: {line, col, text, scopes} with the root scope left out.
function tokenize(grammar, text) {
  const lines = text.split(/\r?\n/);
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const out = [];
  let stack = vsctm.INITIAL;
  lines.forEach((line, i) => {
    const r = grammar.tokenizeLine(line, stack);
    for (const t of r.tokens) {
      const text = line.substring(t.startIndex, t.endIndex);
      const scopes = t.scopes.slice(1);
      out.push({ line: i + 1, col: t.startIndex + 1, text, scopes });
    }
    stack = r.ruleStack;
  });
  return { lines, tokens: out };
}

// The golden form: each source line, then its tokens but the ones of spaces only
// (nothing shows their colour), one per line, with the text as JSON so spaces
// are visible.
function render(rel, result) {
  const out = [`# ${rel}: TextMate scopes (editor/vscode/syntaxes/ipu.tmLanguage.json), without the root scope source.ipu.`,
               '# Regenerate with `node tests/editor/tokenize.js --update` (docs/editor.md).'];
  const byLine = new Map();
  for (const t of result.tokens) {
    if (!byLine.has(t.line)) byLine.set(t.line, []);
    byLine.get(t.line).push(t);
  }
  result.lines.forEach((line, i) => {
    out.push(`${i + 1}| ${line}`);
    for (const t of byLine.get(i + 1) || []) {
      if (t.text.trim() === '') continue;
      out.push(`  ${JSON.stringify(t.text)} ${t.scopes.length ? t.scopes.join(' ') : '-'}`);
    }
  });
  return out.join('\n') + '\n';
}

function walk(dir, out) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.ipu')) out.push(p);
  }
  return out;
}

// `// expect-error: IPU1017` on a line, or `// expect-error: IPU1017 @12:5` for line 12.
function expectedErrors(text) {
  const re = /\/\/\s*expect-error:\s*(IPU\d{4})(?:\s+@(\d+))?/;
  const out = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const m = re.exec(line);
    if (m) out.push({ code: m[1], line: m[2] ? Number(m[2]) : i + 1 });
  });
  return out;
}

// Scripts with a lexical error, or an unknown unit, are not valid for the grammar.
const isLexical = (code) => code.startsWith('IPU00') || code === 'IPU1017';
// Errors the grammar shows as `invalid.*`.
const SEEN_BY_GRAMMAR = new Set(['IPU0002', 'IPU0012', 'IPU1017']);

// A snippet body with its placeholders replaced: `${N:default}` by the default,
// `${N|a,b|}` by the choice picked in `choices` (the first by default), `$N` by
// what placeholder N holds; tabs become the two spaces of the canonical style.
function expandSnippet(body, choices = {}) {
  const values = {};
  let text = body.join('\n');
  let guard = 0;
  for (;;) {
    const before = text;
    text = text.replace(/\$\{(\d+):([^${}]*)\}/g, (m, n, d) => (values[n] = d));
    text = text.replace(/\$\{(\d+)\|([^|]*)\|\}/g, (m, n, list) => {
      const options = list.split(',');
      return (values[n] = options[choices[n] ?? 0]);
    });
    if (text === before || ++guard > 20) break;
  }
  text = text.replace(/\$(\d+)/g, (m, n) => values[n] ?? '');
  return text.replace(/\t/g, '  ');
}

// Scripts made of every snippet: the defaults, then one script per other choice.
function snippetScripts() {
  const file = path.join(root, 'editor', 'vscode', 'snippets', 'ipu.code-snippets');
  const snippets = JSON.parse(fs.readFileSync(file, 'utf8'));
  const prelude = ['std/pods', 'std/precision', 'std/layers', 'std/datasets', 'std/models/bert',
                   'std/models/gpt', 'std/models/groupbert', 'std/models/vit'].map((m) => `import "${m}"`);
  // A member snippet (`phase`) goes into a variant of the training snippet's training.
  const place = (text) => /^phase\b/.test(text)
    ? `training phase_snippet = pretrain with {\n${text.replace(/^/gm, '  ')}\n}` : text;
  const compose = (name, choices) => prelude.concat(Object.entries(snippets).map(
    ([n, s]) => place(expandSnippet(s.body, n === name ? choices : {})))).join('\n\n') + '\n';
  const scripts = [{ what: 'all snippets with their defaults', text: compose(null, {}) }];
  for (const [name, s] of Object.entries(snippets)) {
    const re = /\$\{(\d+)\|([^|]*)\|\}/g;
    let m;
    while ((m = re.exec(s.body.join('\n')))) {
      const options = m[2].split(',');
      for (let k = 1; k < options.length; k++)
        scripts.push({ what: `snippet "${name}" with ${options[k]}`, text: compose(name, { [m[1]]: k }) });
    }
  }
  return scripts;
}

function checkSnippets(grammar, failures) {
  const scripts = snippetScripts();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipu-snippets-'));
  try {
    fs.mkdirSync(path.join(dir, 'hooks'));
    fs.writeFileSync(path.join(dir, 'hooks', 'log_steps.lua'), 'function on_step(ctx) end\n');
    scripts.forEach((s, i) => {
      const file = path.join(dir, `snippets_${i}.ipu`);
      fs.writeFileSync(file, s.text);
      // The defaults must check clean; another choice may make the plan not fit
      // (`recompute: none`): memory errors (IPU2001, IPU2002) are allowed there.
      const r = spawnSync(ipu, ['check', file, '--format', 'json'], { encoding: 'utf8' });
      let errors;
      try {
        errors = JSON.parse(r.stdout).diagnostics.filter((d) => d.severity === 'error');
      } catch (e) {
        errors = [{ code: '?', rendered: `ipu check exited ${r.status}: ${r.stderr}${r.stdout}` }];
      }
      const allowed = i === 0 ? [] : ['IPU2001', 'IPU2002'];
      const bad = errors.filter((d) => !allowed.includes(d.code));
      if (bad.length || (i === 0 && r.status !== 0))
        failures.push(`${s.what}: \`ipu check\` reports:\n${bad.map((d) => d.rendered).join('')}--- script ---\n${s.text}`);
      for (const t of tokenize(grammar, s.text).tokens)
        if (t.scopes.some((sc) => sc.startsWith('invalid.')))
          failures.push(`${s.what}: line ${t.line}: ${JSON.stringify(t.text)} is ${t.scopes.join(' ')}`);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return scripts.length;
}

// VS Code indents the line after one matching increaseIndentPattern one level
// more, and a line matching decreaseIndentPattern one level less: on canonical
// files that must give the indentation `ipu fmt` wrote. Lines in raw strings, Lua
// code or block comments, and the continuation lines of wrapped sums, are skipped.
function checkLanguageConfiguration(grammar, files, failures) {
  const file = path.join(root, 'editor', 'vscode', 'language-configuration.json');
  const conf = JSON.parse(fs.readFileSync(file, 'utf8'));
  let increase, decrease;
  try {
    increase = new RegExp(conf.indentationRules.increaseIndentPattern);
    decrease = new RegExp(conf.indentationRules.decreaseIndentPattern);
    new RegExp(conf.wordPattern);
    new RegExp(conf.folding.markers.start);
    new RegExp(conf.folding.markers.end);
    for (const rule of conf.onEnterRules || []) new RegExp(rule.beforeText);
  } catch (e) {
    failures.push(`language-configuration.json: ${e.message}`);
    return 0;
  }
  const unit = 2;
  let pairs = 0;
  for (const f of files) {
    const rel = path.relative(root, f);
    const text = fs.readFileSync(f, 'utf8');
    const { lines, tokens } = tokenize(grammar, text);
    const inText = new Set();
    for (const t of tokens)
      if (t.col === 1 && t.scopes.some((s) => /^(string\.quoted\.triple|comment\.block|meta\.embedded)/.test(s)))
        inText.add(t.line);
    const indent = (l) => l.match(/^ */)[0].length;
    const continuation = (l) => /^\s*[-+]\s/.test(l);
    let prev = -1;
    lines.forEach((line, i) => {
      if (line.trim() === '' || inText.has(i + 1)) return;
      if (prev >= 0 && !continuation(line) && !continuation(lines[prev]) && !(i > 0 && continuation(lines[i - 1]))) {
        const want = indent(lines[prev]) + (increase.test(lines[prev]) ? unit : 0) - (decrease.test(line) ? unit : 0);
        pairs++;
        if (indent(line) !== want)
          failures.push(`${rel}:${i + 1}: the indentation rules give ${want} spaces after line ${prev + 1}, \`ipu fmt\` wrote ${indent(line)}: ${line.trim()}`);
      }
      prev = i;
    });
  }
  return pairs;
}

// The `$ipu` problem matcher against what `ipu check` prints.
function checkProblemMatcher(failures) {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'editor', 'vscode', 'package.json'), 'utf8'));
  const matcher = manifest.contributes.problemMatchers.find((m) => m.name === 'ipu');
  const re = new RegExp(matcher.pattern.regexp);
  const cases = [
    ['tests/diagnostics/IPU1017_unknown_unit.ipu', 'error', 'IPU1017'],
    ['tests/diagnostics/IPU1108_pod_underused.ipu', 'warning', 'IPU1108'],
  ];
  for (const [rel, severity, code] of cases) {
    const file = path.join(root, rel);
    if (!fs.existsSync(file)) {
      failures.push(`problem matcher: ${rel} is gone; pick another script that reports ${code}`);
      continue;
    }
    const r = spawnSync(ipu, ['check', file], { encoding: 'utf8' });
    const out = (r.stdout || '') + (r.stderr || '');
    const d = JSON.parse(spawnSync(ipu, ['check', file, '--format', 'json'], { encoding: 'utf8' }).stdout)
      .diagnostics.find((x) => x.code === code);
    const hits = out.split('\n').map((l) => re.exec(l)).filter(Boolean);
    const p = matcher.pattern;
    const ok = d && hits.some((m) => m[p.severity] === severity && m[p.code] === code && Number(m[p.line]) === d.line &&
                                     Number(m[p.column]) === d.column && m[p.message] === d.message &&
                                     path.resolve(m[p.file]) === path.resolve(file));
    if (!ok) failures.push(`problem matcher: no line of \`ipu check ${rel}\` reads as ${severity} ${code}:\n${out}`);
  }
  return cases.length;
}

async function main() {
  const grammar = await makeGrammar();
  if (printFile) {
    process.stdout.write(render(path.relative(root, printFile), tokenize(grammar, fs.readFileSync(printFile, 'utf8'))));
    return 0;
  }
  const goldenDir = path.join(__dirname, 'goldens');
  const goldenSources = [
    ...walk(path.join(root, 'examples'), []),
    ...walk(path.join(root, 'stdlib'), []),
    ...walk(path.join(__dirname, 'fixtures'), []),
  ];
  const checked = [
    ...goldenSources,
    ...walk(path.join(root, 'tests', 'scripts'), []),
    ...walk(path.join(root, 'tests', 'diagnostics'), []),
  ];
  const failures = [];
  let invalidChecked = 0, expectedSeen = 0;

  // 1. goldens
  const wanted = new Set();
  for (const file of goldenSources) {
    const rel = path.relative(root, file);
    const goldenRel = rel.startsWith('tests/editor/') ? rel.slice('tests/editor/'.length) : rel;
    const golden = path.join(goldenDir, goldenRel + '.scopes');
    wanted.add(path.resolve(golden));
    const text = render(rel, tokenize(grammar, fs.readFileSync(file, 'utf8')));
    if (update) {
      fs.mkdirSync(path.dirname(golden), { recursive: true });
      if (!fs.existsSync(golden) || fs.readFileSync(golden, 'utf8') !== text) {
        fs.writeFileSync(golden, text);
        console.log(`updated ${path.relative(root, golden)}`);
      }
      continue;
    }
    if (!fs.existsSync(golden)) {
      failures.push(`${rel}: no golden ${path.relative(root, golden)}`);
      continue;
    }
    const want = fs.readFileSync(golden, 'utf8');
    if (want !== text) {
      const a = want.split('\n'), b = text.split('\n');
      let k = 0;
      while (k < a.length && k < b.length && a[k] === b[k]) k++;
      let src = '';
      for (let j = k; j >= 0; j--) if (/^\d+\| /.test(b[j] || '')) { src = b[j]; break; }
      failures.push(`${rel}: scopes differ from ${path.relative(root, golden)} at golden line ${k + 1}` +
                    `\n    source:   ${src}\n    expected: ${a[k] ?? '(end of file)'}\n    actual:   ${b[k] ?? '(end of file)'}`);
    }
  }
  for (const golden of fs.existsSync(goldenDir) ? listAll(goldenDir) : []) {
    if (!golden.endsWith('.scopes') || wanted.has(path.resolve(golden))) continue;
    if (update) {
      fs.unlinkSync(golden);
      console.log(`removed ${path.relative(root, golden)}`);
    } else {
      failures.push(`${path.relative(root, golden)}: golden of a file that no longer exists`);
    }
  }

  // 2. invalid scopes
  for (const file of checked) {
    const rel = path.relative(root, file);
    const text = fs.readFileSync(file, 'utf8');
    const { tokens } = tokenize(grammar, text);
    const invalid = tokens.filter((t) => t.scopes.some((s) => s.startsWith('invalid.')));
    const errors = expectedErrors(text);
    if (!errors.some((e) => isLexical(e.code))) {
      invalidChecked++;
      for (const t of invalid)
        failures.push(`${rel}:${t.line}:${t.col}: ${JSON.stringify(t.text)} is ${t.scopes.join(' ')} in a valid script`);
    }
    for (const e of errors.filter((e) => SEEN_BY_GRAMMAR.has(e.code))) {
      expectedSeen++;
      if (!invalid.some((t) => t.line === e.line))
        failures.push(`${rel}:${e.line}: expects ${e.code}, but no token of the line is invalid.*`);
    }
  }

  if (update) {
    console.log(`goldens up to date (${goldenSources.length} files)`);
    return 0;
  }

  // 3. snippets and the problem matcher
  const snippetNote = ipu ? `${checkSnippets(grammar, failures)} snippet scripts accepted by ipu check, ` +
                            `${checkProblemMatcher(failures)} diagnostics read by the problem matcher`
                          : 'snippets and problem matcher not checked (no --ipu)';

  // 4. language configuration
  const canonical = goldenSources.filter((f) => !path.relative(root, f).startsWith('tests'));
  const pairs = checkLanguageConfiguration(grammar, canonical, failures);

  for (const f of failures) console.log(`FAIL ${f}`);
  console.log(`${goldenSources.length} goldens compared; ${invalidChecked} valid scripts free of invalid.* scopes; ` +
              `${expectedSeen} expected errors shown as invalid.*; ${snippetNote}; ` +
              `indentation rules agree on ${pairs} pairs of lines`);
  if (failures.length) {
    console.log(`${failures.length} failure(s). If the grammar or a file changed on purpose, review the new scopes and run:` +
                `\n  node ${path.relative(process.cwd(), __filename)} --modules ${path.relative(process.cwd(), modules) || '.'} --update`);
    return 1;
  }
  return 0;
}

function listAll(dir) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...listAll(p));
    else out.push(p);
  }
  return out;
}

main().then((code) => process.exit(code), (e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
