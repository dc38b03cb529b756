-- Cancel an execution: one waiting on interrupts ends now (interrupts cleared); a running one gets a
-- durable cancel intent that its owner sees through pub/sub or, at the latest, at its next lease renewal.
-- A caller whose user_id is not the thread's bound one gets not_found, like an unknown execution.
-- ARGV[1]: {execution_id, ros_invocation_id, user_id}. Returns {status, owner, execution}.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
if doc == nil or binds_other_user(doc, arg.user_id) then return reply({status = 'not_found'}) end
local now = server_now()
local _, changed = expire_and_reap(doc, now)
local ex = find_execution(doc, arg.execution_id)
local result
if ex == nil or ex.ros_invocation_id ~= arg.ros_invocation_id then
  result = {status = 'not_found'}
elseif ex.status == 'lost' then
  result = {status = 'lost', execution = ex}
elseif TERMINAL[ex.status] then
  result = {status = 'already_terminal', execution = ex}
elseif ex.status == 'interrupted' then
  doc.updated_at = now
  result = {status = 'cancelled', execution = end_execution(doc, ex, 'cancelled', now)}
  changed = true
else
  ex.cancel_requested = true
  doc.updated_at = now
  local owner = NULL
  if not is_null(doc.active) then owner = doc.active.owner end
  result = {status = 'cancelled', owner = owner, execution = ex}
  changed = true
end
if changed then save(key, doc) end
return reply(result)
