-- `.ipu` scripts in Neovim 0.7 or later with the language server `ipu lsp`
-- (docs/editor.md), through Neovim's built-in client: no plugin manager, no
-- nvim-lspconfig. What it does:
--
--   * *.ipu files get the filetype `ipu`; the Vim files of ../vim (colouring,
--     indentation, `:make` with `ipu check`) are added to 'runtimepath' when
--     this file sits in the repository's editor/ folder;
--   * on FileType ipu, the buffer is attached to an `ipu lsp` server: one per
--     project root (the nearest folder above the file holding a root marker,
--     `.git` by default); a file with no marker above it (a standard-library
--     file opened by go to definition, a script in /tmp) joins the server that
--     is already running, or starts one in its own folder;
--   * buffer-local mappings (unless keymaps = false): K hover, gd definition,
--     gr references, gs signature help, <leader>rn rename, <leader>ca code
--     actions (the quick fixes), <leader>f format, [d and ]d the previous and
--     next diagnostic, <leader>e the diagnostic under the cursor; completion
--     with <C-x><C-o> ('omnifunc').
--
-- Use it from init.lua:
--
--   dofile("/path/to/ipu/editor/nvim/ipu.lua").setup({
--     cmd = { "/path/to/ipu/build/ipu", "lsp" },   -- default { "ipu", "lsp" }: `ipu` on the PATH
--   })
--
-- or from init.vim (the settings in g:ipu_lsp, all optional):
--
--   let g:ipu_lsp = {'cmd': ['/path/to/ipu/build/ipu', 'lsp']}
--   luafile /path/to/ipu/editor/nvim/ipu.lua
--
-- Options (setup's table, or the keys of g:ipu_lsp):
--   cmd             the server's command line, a list (default { "ipu", "lsp" })
--   root_markers    names whose folder is a project root (default { ".git" })
--   keymaps         the buffer-local mappings above (default true)
--   format_on_save  format with the server before each :write (default false)
--   vim_runtime     add ../vim to 'runtimepath' (default true)
--
-- Only APIs of Neovim 0.7 are used (vim.lsp.start_client, buf_attach_client,
-- nvim_create_autocmd); formatting uses vim.lsp.buf.format where it exists
-- (0.8 and later). Tested with 0.7.2; later versions deprecate some of these
-- functions in favour of vim.lsp.start.

local M = {}

local defaults = {
  cmd = { 'ipu', 'lsp' },
  root_markers = { '.git' },
  keymaps = true,
  format_on_save = false,
  vim_runtime = true,
}

M.config = vim.deepcopy(defaults)
M.clients = {} -- project root -> client id
local last_root = nil -- the root of the server started or joined last

-- This file's folder, and the repository's editor/vim next to it.
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local vim_dir = vim.fn.fnamemodify(here .. '/../vim', ':p'):gsub('/$', '')

local function running(root)
  local id = M.clients[root]
  if not id then
    return nil
  end
  local client = vim.lsp.get_client_by_id(id)
  if client == nil or client.is_stopped() then
    M.clients[root] = nil
    return nil
  end
  return id
end

-- The nearest folder at or above dir that holds one of the markers, or nil.
local function find_root(dir)
  for _, marker in ipairs(M.config.root_markers) do
    local d = vim.fn.finddir(marker, dir .. ';')
    if d ~= '' then
      return vim.fn.fnamemodify(d, ':p:h:h')
    end
    local f = vim.fn.findfile(marker, dir .. ';')
    if f ~= '' then
      return vim.fn.fnamemodify(f, ':p:h')
    end
  end
  return nil
end

local function map(bufnr, mode, lhs, rhs, desc)
  vim.api.nvim_buf_set_keymap(bufnr, mode, lhs, rhs, { noremap = true, silent = true, desc = desc })
end

local function format_buffer()
  if vim.lsp.buf.format then
    vim.lsp.buf.format({ timeout_ms = 2000 })
  else
    vim.lsp.buf.formatting_sync(nil, 2000) -- Neovim 0.7
  end
end
M.format = format_buffer

local function on_attach(_, bufnr)
  vim.api.nvim_buf_set_option(bufnr, 'omnifunc', 'v:lua.vim.lsp.omnifunc')
  if M.config.keymaps then
    map(bufnr, 'n', 'K', '<cmd>lua vim.lsp.buf.hover()<CR>', 'ipu: hover')
    map(bufnr, 'n', 'gd', '<cmd>lua vim.lsp.buf.definition()<CR>', 'ipu: go to definition')
    map(bufnr, 'n', 'gr', '<cmd>lua vim.lsp.buf.references()<CR>', 'ipu: references')
    map(bufnr, 'n', 'gs', '<cmd>lua vim.lsp.buf.signature_help()<CR>', 'ipu: signature help')
    map(bufnr, 'n', '<leader>rn', '<cmd>lua vim.lsp.buf.rename()<CR>', 'ipu: rename')
    map(bufnr, 'n', '<leader>ca', '<cmd>lua vim.lsp.buf.code_action()<CR>', 'ipu: code actions')
    map(bufnr, 'n', '<leader>f', '<cmd>lua _G.ipu_lsp_format()<CR>', 'ipu: format')
    map(bufnr, 'n', '[d', '<cmd>lua vim.diagnostic.goto_prev()<CR>', 'previous diagnostic')
    map(bufnr, 'n', ']d', '<cmd>lua vim.diagnostic.goto_next()<CR>', 'next diagnostic')
    map(bufnr, 'n', '<leader>e', '<cmd>lua vim.diagnostic.open_float()<CR>', 'diagnostic under the cursor')
  end
  if M.config.format_on_save then
    vim.api.nvim_create_autocmd('BufWritePre', {
      group = vim.api.nvim_create_augroup('ipu_lsp_format_' .. bufnr, { clear = true }),
      buffer = bufnr,
      callback = format_buffer,
    })
  end
end
_G.ipu_lsp_format = format_buffer

-- Attaches the buffer to the server of its project, starting the server if
-- needed; returns the client id (nil when the server cannot be started).
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local name = vim.api.nvim_buf_get_name(bufnr)
  local dir = name ~= '' and vim.fn.fnamemodify(name, ':p:h') or vim.fn.getcwd()
  local root = find_root(dir)
  if root == nil then
    -- No marker above the file: the running server, else one for its folder.
    root = (last_root and running(last_root)) and last_root or dir
  end
  local id = running(root)
  if id == nil then
    local ok, result = pcall(vim.lsp.start_client, {
      name = 'ipu',
      cmd = M.config.cmd,
      root_dir = root,
      on_attach = on_attach,
    })
    if not ok or result == nil then
      vim.notify(string.format('ipu: cannot start the language server `%s`: %s (set `cmd`, see editor/nvim/ipu.lua)',
                               table.concat(M.config.cmd, ' '), tostring(result)), vim.log.levels.ERROR)
      return nil
    end
    id = result
    M.clients[root] = id
  end
  last_root = root
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  if M.config.vim_runtime and vim.fn.isdirectory(vim_dir .. '/syntax') == 1 then
    local rtp = vim.opt.runtimepath:get()
    if not vim.tbl_contains(rtp, vim_dir) then
      vim.opt.runtimepath:prepend(vim_dir)
    end
  end
  local group = vim.api.nvim_create_augroup('ipu_lsp', { clear = true })
  vim.api.nvim_create_autocmd({ 'BufRead', 'BufNewFile' }, {
    group = group,
    pattern = '*.ipu',
    command = 'setfiletype ipu',
  })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = 'ipu',
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  -- Buffers of the filetype opened before setup.
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.api.nvim_buf_get_option(b, 'filetype') == 'ipu' then
      M.attach(b)
    end
  end
  return M
end

M.setup(vim.g.ipu_lsp)
return M
