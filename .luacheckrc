-- luacheck's settings for dlock's Redis scripts (core/scripts, integration/cli/scripts), run by
-- ./scripts/test.sh in two passes: the source files, and the scripts as Redis runs them (their
-- `--@include`s pasted in by cmake/embed_lua.cmake, in the build tree's generated/lua/).
--
-- Redis runs Lua 5.1 with a few libraries of its own; a script's KEYS and ARGV are globals.
std = "lua51"
read_globals = { "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct" }
-- Every other warning class stays on: unused variables and values, globals written or read by
-- mistake, shadowing, unreachable code, empty blocks.
max_line_length = 120

-- The helper libraries (files other scripts `--@include`): their top-level functions are the
-- scripts' to use. Read from the files themselves, so a new helper needs no edit here.
local libraries = { "core/scripts/prelude.lua", "core/scripts/primitives/holders.lua" }
local helpers = {}
for _, path in ipairs(libraries) do
  local file = assert(io.open(path), "run luacheck from the repository's root: " .. path .. " not found")
  for name in file:read("*a"):gmatch("\nlocal function ([%w_]+)") do helpers[#helpers + 1] = name end
  file:close()
end
local unused_helpers = {}
for _, name in ipairs(helpers) do unused_helpers[#unused_helpers + 1] = "211/" .. name end

-- A library defines what others use: its helpers are not unused there.
for _, path in ipairs(libraries) do files[path] = { ignore = unused_helpers } end
-- A script's source calls the helpers it includes as if they were globals; a misspelt one is
-- still an undefined global. The second pass checks that each script includes what it calls.
files["core/scripts/lock"] = { read_globals = helpers }
files["core/scripts/primitives"] = { read_globals = helpers }
-- The assembled scripts: a script uses some of the helpers it includes, not all.
files["**/generated/lua"] = { ignore = unused_helpers }
