-- Drives headless Neovim, configured by editor/nvim/ipu.lua, against `ipu lsp`
-- (run by nvim_lsp_test.sh, which says what it needs). Through Neovim's own
-- client and its user-facing functions (vim.lsp.buf.*, vim.diagnostic), on a
-- copy of examples/bert_large_pod16.ipu:
--
--   1. open it: filetype `ipu`, the Vim syntax of editor/vim, a client named
--      `ipu` attached, the diagnostics published and empty;
--   2. hover on the field `recompute`: a floating window with its doc;
--   3. an edit (`every_layer` -> `every_layr`): the IPU1003 error at its place;
--   4. the code action menu at the error: the "did you mean `every_layer`"
--      quick fix chosen, the buffer back to the example, no diagnostic left;
--   5. go to definition on `bert`: the standard library's bert.ipu opened at
--      `model bert(`;
--   6. the buffer messed up (spaces, indentation), then formatted: the
--      example's text again (the examples are as `ipu fmt` writes them);
--   7. the server stopped.
--
-- The buffer's text is checked after each step. Environment: IPU_BIN (the ipu
-- binary), IPU_ROOT (the repository), IPU_WORK (a scratch folder holding the
-- copy), IPU_OUT (the report, whose last line is "N passed, N failed").

local bin, root, work, out = vim.env.IPU_BIN, vim.env.IPU_ROOT, vim.env.IPU_WORK, vim.env.IPU_OUT
local report = {}
local passed, failed = 0, 0
local function say(line)
  for l in (line .. '\n'):gmatch('(.-)\n') do -- writefile() would write a newline inside an item as NUL
    table.insert(report, l)
  end
end
local function finish()
  say(string.format('nvim_lsp_test: %d passed, %d failed', passed, failed))
  vim.fn.writefile(report, out)
  vim.cmd(failed == 0 and 'qall!' or 'cquit!')
end

local function fail(msg)
  error(msg, 0)
end
local function expect(cond, msg)
  if not cond then
    fail(msg)
  end
end
local function wait(ms, cond, what)
  if not vim.wait(ms, cond, 20) then
    fail('timed out (' .. ms .. ' ms) waiting for ' .. what)
  end
end
local function lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end
local function text(buf)
  return table.concat(lines(buf), '\n')
end
local function show(v)
  return vim.inspect(v)
end

-- Every publishDiagnostics, in order: { uri, version, n }.
local published = {}
local default_publish = vim.lsp.handlers['textDocument/publishDiagnostics']
vim.lsp.handlers['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
  table.insert(published, { uri = result.uri, version = result.version, n = #result.diagnostics })
  return default_publish(err, result, ctx, config)
end
-- The diagnostics publication for buf of its current version.
local function wait_published(buf, what)
  local uri = vim.uri_from_bufnr(buf)
  wait(10000, function()
    local v = vim.lsp.util.buf_versions[buf]
    for _, p in ipairs(published) do
      if p.uri == uri and p.version == v then
        return true
      end
    end
    return false
  end, 'the diagnostics of ' .. what)
end

local function float_windows()
  local wins = {}
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= '' then
      table.insert(wins, w)
    end
  end
  return wins
end

local function format_sync()
  if vim.lsp.buf.format then
    vim.lsp.buf.format({ timeout_ms = 10000 })
  else
    vim.lsp.buf.formatting_sync(nil, 10000) -- Neovim 0.7
  end
end

local example = work .. '/bert_large_pod16.ipu'
local original = vim.fn.readfile(example)
local function line_of(prefix)
  for i, l in ipairs(original) do
    if l:sub(1, #prefix) == prefix then
      return i
    end
  end
  fail('no line starting with ' .. prefix .. ' in the example')
end
local buf

local steps = {
  { 'open the example: filetype, syntax, client attached, diagnostics published and empty', function()
    vim.cmd('edit ' .. vim.fn.fnameescape(example))
    buf = vim.api.nvim_get_current_buf()
    expect(vim.bo[buf].filetype == 'ipu', 'filetype is ' .. vim.bo[buf].filetype)
    expect(vim.b[buf].current_syntax == 'ipu', 'syntax is ' .. tostring(vim.b[buf].current_syntax))
    wait(5000, function()
      return #vim.tbl_values(vim.lsp.buf_get_clients(buf)) == 1
    end, 'a client to attach')
    local client = vim.tbl_values(vim.lsp.buf_get_clients(buf))[1]
    expect(client.name == 'ipu', 'client ' .. client.name)
    wait(10000, function()
      return client.initialized == true or client.server_capabilities ~= nil or client.resolved_capabilities ~= nil
    end, 'initialize')
    wait_published(buf, 'the example')
    expect(#vim.diagnostic.get(buf) == 0, 'diagnostics: ' .. show(vim.diagnostic.get(buf)))
    expect(vim.bo[buf].omnifunc == 'v:lua.vim.lsp.omnifunc', 'omnifunc ' .. vim.bo[buf].omnifunc)
    expect(vim.fn.maparg('K', 'n'):find('hover') ~= nil, 'K is not hover')
    expect(text(buf) == table.concat(original, '\n'), 'the buffer is not the file')
  end },

  { 'hover on `recompute`: a floating window with the field\'s doc', function()
    local row = line_of('  recompute:')
    vim.api.nvim_win_set_cursor(0, { row, 4 })
    vim.lsp.buf.hover()
    wait(10000, function()
      return #float_windows() > 0
    end, 'the hover window')
    local win = float_windows()[1]
    local shown = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), '\n')
    expect(shown:find('recompute', 1, true) and shown:find('field of', 1, true) and
           shown:find('recomputation: keep only checkpoints and recompute activations in the backward pass', 1, true),
           'hover shows:\n' .. shown)
    vim.api.nvim_win_close(win, true)
    expect(vim.api.nvim_get_current_buf() == buf, 'the cursor left the script')
    expect(text(buf) == table.concat(original, '\n'), 'hover changed the buffer')
  end },

  { 'an edit (`every_layer` -> `every_layr`): IPU1003 at the misspelt value', function()
    local row = line_of('  recompute: every_layer')
    vim.api.nvim_buf_set_text(buf, row - 1, 22, row - 1, 23, { '' })
    expect(vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1] == '  recompute: every_layr', 'the edit')
    wait_published(buf, 'the edit')
    local d = vim.diagnostic.get(buf)
    expect(#d == 1, 'diagnostics: ' .. show(d))
    d = d[1]
    expect(d.code == 'IPU1003' and d.severity == vim.diagnostic.severity.ERROR and d.lnum == row - 1 and
           d.col == 13 and d.end_lnum == row - 1 and d.end_col == 23, 'diagnostic: ' .. show(d))
    expect(d.message:find('did you mean `every_layer`?', 1, true), 'message: ' .. d.message)
  end },

  { 'code action at the error: the "did you mean" quick fix applied, the error gone', function()
    local row = line_of('  recompute: every_layer')
    vim.api.nvim_win_set_cursor(0, { row, 15 })
    local offered
    local default_select = vim.ui.select
    vim.ui.select = function(items, opts, on_choice)
      offered = {}
      local pick
      for _, item in ipairs(items) do
        local title = opts.format_item(item)
        table.insert(offered, title)
        if title:find('every_layer', 1, true) then
          pick = item
        end
      end
      on_choice(pick)
    end
    vim.lsp.buf.code_action()
    wait(10000, function()
      return offered ~= nil
    end, 'the code actions')
    vim.ui.select = default_select
    expect(#offered == 1, 'actions offered: ' .. show(offered))
    wait(5000, function()
      return vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1] == '  recompute: every_layer'
    end, 'the fix in the buffer')
    expect(text(buf) == table.concat(original, '\n'), 'the buffer is not the example again:\n' .. text(buf))
    wait_published(buf, 'the fix')
    expect(#vim.diagnostic.get(buf) == 0, 'diagnostics: ' .. show(vim.diagnostic.get(buf)))
  end },

  { 'go to definition on `bert`: the standard library\'s bert.ipu at `model bert(`', function()
    local row = line_of('model bert_large = bert(')
    vim.api.nvim_win_set_cursor(0, { row, #'model bert_large = be' })
    vim.lsp.buf.definition()
    wait(10000, function()
      return vim.api.nvim_get_current_buf() ~= buf
    end, 'the definition to open')
    local name = vim.api.nvim_buf_get_name(0)
    expect(name == work .. '/stdlib/std/models/bert.ipu', 'opened ' .. name)
    local cursor = vim.api.nvim_win_get_cursor(0)
    local line = vim.api.nvim_get_current_line()
    expect(line:sub(1, 11) == 'model bert(' and cursor[2] == 6, 'at ' .. show(cursor) .. ': ' .. line)
    expect(text(0) == table.concat(vim.fn.readfile(root .. '/stdlib/models/bert.ipu'), '\n'),
           'not the standard library\'s text')
    -- The standard-library file is served by the same server.
    wait(5000, function()
      return #vim.tbl_values(vim.lsp.buf_get_clients(0)) == 1
    end, 'the client to attach to bert.ipu')
    expect(#vim.lsp.get_active_clients() == 1, 'servers: ' .. #vim.lsp.get_active_clients())
    vim.cmd('buffer ' .. buf)
    expect(text(buf) == table.concat(original, '\n'), 'the script changed')
  end },

  { 'format: a messed-up buffer becomes the example again (`ipu fmt`\'s text)', function()
    local r1 = line_of('  replicas: 4') - 1
    local r2 = line_of('optimizer lamb_bert') - 1
    vim.api.nvim_buf_set_lines(buf, r1, r1 + 1, false, { '      replicas:4' })
    local l2 = vim.api.nvim_buf_get_lines(buf, r2, r2 + 1, false)[1]
    vim.api.nvim_buf_set_lines(buf, r2, r2 + 1, false, { (l2:gsub(', ', ','):gsub(' = ', '=')) })
    vim.api.nvim_buf_set_lines(buf, 9, 9, false, { '', '' }) -- two blank lines more
    expect(text(buf) ~= table.concat(original, '\n'), 'the buffer was not changed')
    wait_published(buf, 'the messed-up buffer')
    expect(#vim.diagnostic.get(buf) == 0, 'it still checks: ' .. show(vim.diagnostic.get(buf)))
    format_sync()
    local now = lines(buf)
    expect(table.concat(now, '\n') == table.concat(original, '\n'),
           'formatted:\n' .. table.concat(now, '\n') .. '\nexpected:\n' .. table.concat(original, '\n'))
  end },

  { 'stop the server', function()
    vim.lsp.stop_client(vim.lsp.get_active_clients())
    wait(10000, function()
      return #vim.lsp.get_active_clients() == 0
    end, 'the server to stop')
  end },
}

local ok, err = xpcall(function()
  vim.cmd('syntax on')
  dofile(root .. '/editor/nvim/ipu.lua').setup({ cmd = { bin, 'lsp', '--stdlib-dir', work .. '/stdlib' } })
  for _, step in ipairs(steps) do
    local good, msg = pcall(step[2])
    if good then
      passed = passed + 1
      say('ok   ' .. step[1])
    else
      failed = failed + 1
      say('FAIL ' .. step[1] .. '\n     ' .. (tostring(msg):gsub('\n', '\n     ')))
      break -- the steps build on each other
    end
  end
end, debug.traceback)
if not ok then
  failed = failed + 1
  say('FAIL ' .. tostring(err))
end
finish()
