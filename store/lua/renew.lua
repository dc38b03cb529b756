-- Extend the lease of a run that still holds it (same run id and fence) and report any cancel intent,
-- so a lost pub/sub message is never a lost cancel. A fenced-off owner learns it lost the lease.
-- ARGV[1]: {lease}. Returns {ok, cancel, until, adoptable}.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
if not holds_lease(doc, arg.lease) then return reply({ok = false, cancel = false}) end
doc.active.lease_until = server_now() + LEASE_SECONDS
local cancel = false
if not is_null(doc.execution) and doc.execution.execution_id == doc.active.execution_id then
  cancel = doc.execution.cancel_requested == true
end
redis.call('SET', key, cjson.encode(doc), 'KEEPTTL')
return reply({ok = true, cancel = cancel, ['until'] = doc.active.lease_until, adoptable = not is_null(doc.active.adopt)})
