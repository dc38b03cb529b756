-- Cancel an execution: one waiting on interrupts ends now (interrupts cleared); a running one gets a
-- durable cancel intent that its owner sees through pub/sub or, at the latest, at its next lease renewal.
-- KEYS[1] thread state. ARGV: execution_id, ros_invocation_id, now, retention ms.
local key = KEYS[1]
local doc = load(key)
if doc == nil then return reply({status = 'not_found'}) end
local now = tonumber(ARGV[3])
local expired, lost = expire_and_reap(doc, now)
local changed = not is_null(expired) or not is_null(lost)
local ex = find_execution(doc, ARGV[1])
local result
if ex == nil or ex.ros_invocation_id ~= ARGV[2] then
  result = {status = 'not_found'}
elseif ex.status == 'lost' then
  result = {status = 'lost', execution = ex}
elseif TERMINAL[ex.status] then
  result = {status = 'already_terminal', execution = ex}
elseif ex.status == 'interrupted' then
  result = {status = 'cancelled', execution = end_execution(doc, ex, 'cancelled', now)}
  changed = true
else
  ex.cancel_requested = true
  local owner = NULL
  if not is_null(doc.active) then owner = doc.active.owner end
  result = {status = 'cancelled', owner = owner, execution = ex}
  changed = true
end
if changed then
  doc.updated_at = now
  save(key, doc, tonumber(ARGV[4]))
end
return reply(result)
