-- Stop by thread (rules.stop): a queued run named by run_id leaves the queue; the active run (any, or the one named)
-- gets a durable cancel intent; a thread waiting on interrupts (no run_id, or the run that interrupted) ends them.
-- A caller whose user_id is not the thread's bound one gets not_found, like an unknown thread.
-- ARGV[1]: {run_id (or null), user_id}. Returns {status, owner, execution_id, execution}.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
if doc == nil or binds_other_user(doc, arg.user_id) then return reply({status = 'not_found'}) end
local now = server_now()
local _, changed = expire_and_reap(doc, now)
if drop_stale_places(doc, now) then changed = true end
local run_id = arg.run_id
if is_null(run_id) then run_id = nil end
local function answer(result)
  if changed then save(key, doc) end
  return reply(result)
end
if run_id ~= nil and without_place(doc, run_id) then
  changed = true
  return answer({status = 'cancelled'})
end
local active, ex = doc.active, doc.execution
if not is_null(active) and (run_id == nil or active.run_id == run_id) then
  if is_null(ex) or ex.execution_id ~= active.execution_id or ex.status ~= 'running' then
    return answer({status = 'not_running'})
  end
  ex.cancel_requested = true
  doc.updated_at = now
  changed = true
  return answer({status = 'cancelled', owner = active.owner, execution_id = active.execution_id})
end
if run_id ~= nil and doc.runs[run_id] == nil then return answer({status = 'not_running'}) end
if is_null(active) and not is_null(ex) and ex.status == 'interrupted' then
  local newest, fence = nil, -1
  for id, record in pairs(doc.runs) do
    if record.execution_id == ex.execution_id and (record.fence or 0) > fence then newest, fence = id, record.fence or 0 end
  end
  if run_id == nil or newest == run_id then
    doc.updated_at = now
    changed = true
    local ended = end_execution(doc, ex, 'cancelled', now)
    return answer({status = 'cancelled', execution_id = ended.execution_id, execution = ended})
  end
end
if run_id ~= nil then return answer({status = 'already_terminal'}) end
return answer({status = 'not_running'})
