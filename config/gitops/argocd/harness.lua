-- Runs one Argo CD health script the way Argo CD does: the global `obj` holds the resource (set
-- by the caller before this file), the script is a chunk that returns `hs`. The chunk sees only
-- the libraries Argo CD's Lua VM offers a health script (base functions, string, table, math),
-- not io/os/require, so a script that reaches for them fails here too.
-- Prints the status on the first line and the message after it.
local path = SCRIPT
local f = assert(io.open(path, "r"))
local source = f:read("*a")
f:close()

local env = {
  obj = obj, assert = assert, error = error, ipairs = ipairs, next = next, pairs = pairs,
  pcall = pcall, select = select, tonumber = tonumber, tostring = tostring, type = type,
  unpack = unpack or table.unpack, string = string, table = table, math = math,
}
local chunk, err
if setfenv then -- Lua 5.1 (Argo CD's gopher-lua is 5.1)
  chunk, err = loadstring(source, "=" .. path)
  if chunk then
    setfenv(chunk, env)
  end
else
  chunk, err = load(source, "=" .. path, "t", env)
end
if not chunk then
  io.stderr:write("cannot load " .. path .. ": " .. tostring(err) .. "\n")
  os.exit(3)
end
local ok, hs = pcall(chunk)
if not ok then
  io.stderr:write("script error: " .. tostring(hs) .. "\n")
  os.exit(4)
end
if type(hs) ~= "table" then
  io.stderr:write("script returned " .. type(hs) .. ", not a table\n")
  os.exit(5)
end
io.write(tostring(hs.status), "\n", tostring(hs.message))
