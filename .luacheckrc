-- luacheck's settings for dlock's Redis scripts (core/scripts, examples/scripts), run by
-- ./scripts/test.sh in two passes: the source files, and the scripts as Redis runs them (their
-- `--@include`s pasted in by cmake/embed_lua.cmake, in the build tree's generated/lua/).
--
-- Redis runs Lua 5.1 with a few libraries of its own; a script's KEYS and ARGV are globals.
std = "lua51"
read_globals = { "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct" }
-- Every other warning class stays on: unused variables and values, globals written or read by
-- mistake, shadowing, unreachable code, empty blocks.
max_line_length = 120

-- The helper libraries: the files some script pastes in with `--@include NAME`. Their top-level
-- functions are the scripts' to use. Both found from the files themselves, so a new library or
-- helper needs no edit here.
local function read(path)
  local file = assert(io.open(path), "run luacheck from the repository's root: " .. path .. " not found")
  local text = file:read("*a")
  file:close()
  return text
end
local libraries, seen = {}, {}
local listing = assert(io.popen("find core/scripts -name '*.lua' | sort"))
for path in listing:lines() do
  local root = path:match("^(.-/scripts)/")
  for name in read(path):gmatch("%-%-@include ([%w_/]+)") do
    local library = root .. "/" .. name .. ".lua"
    if not seen[library] then
      seen[library] = true
      libraries[#libraries + 1] = library
    end
  end
end
listing:close()
local helpers = {}
for _, path in ipairs(libraries) do
  for name in ("\n" .. read(path)):gmatch("\nlocal function ([%w_]+)") do helpers[#helpers + 1] = name end
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
