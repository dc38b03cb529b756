-- Extend the lease of a run that still holds it (same run id and fence) and report any cancel intent,
-- so a lost pub/sub message is never a lost cancel. A fenced-off owner learns it lost the lease.
-- KEYS[1] thread state. ARGV: run_id, fence, lease seconds.
local key = KEYS[1]
local doc = load(key)
if doc == nil or is_null(doc.active) or doc.active.run_id ~= ARGV[1] or doc.active.fence ~= tonumber(ARGV[2]) then
  return reply({ok = false, cancel = false})
end
doc.active.lease_until = server_now() + tonumber(ARGV[3])
local cancel = false
if not is_null(doc.execution) and doc.execution.execution_id == doc.active.execution_id then
  cancel = doc.execution.cancel_requested == true
end
redis.call('SET', key, cjson.encode(doc), 'KEEPTTL')
return reply({ok = true, cancel = cancel})
