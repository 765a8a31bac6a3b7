// The extension's code: starts `ipu lsp` (the language server, docs/editor.md)
// through vscode-languageclient for the documents of the `ipu` language, and
// restarts it when its settings change or on the command "IPU: Restart the
// language server". Everything else the extension gives (colouring, snippets,
// brackets, the `$ipu` problem matcher) is declared in package.json.
//
// Settings (package.json `contributes.configuration`):
//   ipu.server.path   the `ipu` binary: a name looked up on the PATH (default `ipu`)
//                     or a path; `~` and `${workspaceFolder}` are expanded
//   ipu.server.args   more arguments after `ipu lsp` (`ipu lsp --help`)
//   ipu.trace.server  off | messages | verbose: the protocol in the output channel
//                     (read by vscode-languageclient itself, from the client id `ipu`)
//
// `vscode` and `vscode-languageclient` are loaded in activate() only, so that
// the tests of tests/editor can load this file without VS Code and start the
// server with the very command serverCommand() builds (lsp_client_test.js).
'use strict';

const os = require('os');
const path = require('path');

const CLIENT_ID = 'ipu';  // also the prefix of the `ipu.trace.server` setting
const CLIENT_NAME = 'IPU language server';
const LANGUAGE = 'ipu';
// The settings this file reads, with their defaults (as package.json declares them).
const SETTINGS = {
  'ipu.server.path': 'ipu',
  'ipu.server.args': [],
  'ipu.trace.server': 'off',
};
const COMMANDS = ['ipu.restartServer', 'ipu.showServerOutput'];

// Expands `~` (alone or before a `/`) and `${workspaceFolder}` in a setting.
function expand(value, workspaceFolder) {
  let s = String(value);
  if (s === '~' || s.startsWith('~/')) s = path.join(os.homedir(), s.slice(1));
  if (workspaceFolder !== undefined) s = s.split('${workspaceFolder}').join(workspaceFolder);
  return s;
}

// The command that starts the server, from the two settings: `PATH lsp ARGS...`.
// A path with a directory part is made absolute against the workspace folder
// (or the working directory); a bare name is left to the PATH.
function serverCommand(settings, workspaceFolder) {
  const raw = settings['ipu.server.path'];
  let command = expand(typeof raw === 'string' && raw.trim() !== '' ? raw.trim() : SETTINGS['ipu.server.path'],
                       workspaceFolder);
  if (command.includes('/') || command.includes(path.sep)) {
    command = path.resolve(workspaceFolder !== undefined ? workspaceFolder : process.cwd(), command);
  }
  const extra = Array.isArray(settings['ipu.server.args']) ? settings['ipu.server.args'] : [];
  return { command, args: ['lsp', ...extra.map((a) => expand(a, workspaceFolder))] };
}

let client = null;
let output = null;

function readSettings(vscode) {
  const config = vscode.workspace.getConfiguration();
  const settings = {};
  for (const key of Object.keys(SETTINGS)) settings[key] = config.get(key, SETTINGS[key]);
  return settings;
}

function firstWorkspaceFolder(vscode) {
  const folders = vscode.workspace.workspaceFolders;
  return folders && folders.length > 0 ? folders[0].uri.fsPath : undefined;
}

async function startClient(vscode) {
  const { LanguageClient } = require('vscode-languageclient/node');
  const folder = firstWorkspaceFolder(vscode);
  const { command, args } = serverCommand(readSettings(vscode), folder);
  const executable = { command, args, options: folder !== undefined ? { cwd: folder } : {} };
  const serverOptions = { run: executable, debug: executable };
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: LANGUAGE },
      { scheme: 'untitled', language: LANGUAGE },
    ],
    outputChannel: output,
  };
  client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  try {
    await client.start();
  } catch (e) {
    const failed = client;
    client = null;
    try { await failed.dispose(); } catch (_) { /* it never ran */ }
    const choice = await vscode.window.showErrorMessage(
        `Could not start the IPU language server \`${command} ${args.join(' ')}\`: ${e && e.message ? e.message : e}. ` +
        'Set `ipu.server.path` to the `ipu` binary.', 'Open settings');
    if (choice === 'Open settings') {
      vscode.commands.executeCommand('workbench.action.openSettings', 'ipu.server');
    }
  }
}

async function stopClient() {
  if (!client) return;
  const running = client;
  client = null;
  try {
    await running.stop();
  } catch (_) {
    // a server that already exited cannot be stopped; dispose() below frees the rest
  }
  try { await running.dispose(); } catch (_) { /* idem */ }
}

// Restarts run one after the other (two quick changes of a setting must not
// start two servers).
let restarting = Promise.resolve();
function restart(vscode) {
  restarting = restarting.then(async () => {
    await stopClient();
    await startClient(vscode);
  }).catch((e) => {
    if (output) output.appendLine(`ipu: restarting the language server failed: ${e && e.stack ? e.stack : e}`);
  });
  return restarting;
}

async function activate(context) {
  const vscode = require('vscode');
  output = vscode.window.createOutputChannel(CLIENT_NAME);
  context.subscriptions.push(output);
  context.subscriptions.push(vscode.commands.registerCommand('ipu.restartServer', () => restart(vscode)));
  context.subscriptions.push(vscode.commands.registerCommand('ipu.showServerOutput', () => output.show(true)));
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((event) => {
    if (event.affectsConfiguration('ipu.server')) restart(vscode);
  }));
  await restart(vscode);
}

function deactivate() {
  return restarting.then(stopClient);
}

module.exports = { activate, deactivate, serverCommand, SETTINGS, COMMANDS, CLIENT_ID, LANGUAGE };
