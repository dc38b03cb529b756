-- Release the lease of a finished run (only if this run still holds it, same fence); with a status the
-- execution ends and moves to the bounded history. A stale owner changes nothing.
-- KEYS[1] thread state. ARGV: run_id, execution_id, fence, status or '', sequence, identities JSON, now, retention ms.
local key = KEYS[1]
local doc = load(key)
if doc == nil or is_null(doc.active) or doc.active.run_id ~= ARGV[1] or doc.active.fence ~= tonumber(ARGV[3]) then
  return reply({ok = false})
end
local now = tonumber(ARGV[7])
doc.active = NULL
doc.updated_at = now
local ex = doc.execution
if ARGV[4] ~= '' and not is_null(ex) and ex.execution_id == ARGV[2] then
  ex.sequence = tonumber(ARGV[5])
  apply_identities(ex, cjson.decode(ARGV[6]))
  if not TERMINAL[ex.status] then end_execution(doc, ex, ARGV[4], now) end
end
save(key, doc, tonumber(ARGV[8]))
return reply({ok = true})
