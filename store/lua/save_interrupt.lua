-- Persist pending interrupts before RUN_FINISHED announces them, and release the lease. Refused for a
-- fenced-off (stale) owner and when a cancel intent was recorded meanwhile (the cancel wins).
-- KEYS[1] thread state. ARGV: run_id, execution_id, fence, pending JSON, checkpoint JSON string,
-- open_steps JSON, sequence, identities JSON, now, retention ms.
local key = KEYS[1]
local doc = load(key)
local ex, err = owned_execution(doc, ARGV[1], ARGV[2], tonumber(ARGV[3]))
if ex == nil then return reply({error = err}) end
if ex.cancel_requested then return reply({error = 'CANCELLED'}) end
local now = tonumber(ARGV[9])
ex.status = 'interrupted'
ex.pending = cjson.decode(ARGV[4])
ex.checkpoint = ARGV[5]
ex.open_steps = cjson.decode(ARGV[6])
ex.sequence = tonumber(ARGV[7])
ex.updated_at = now
apply_identities(ex, cjson.decode(ARGV[8]))
doc.active = NULL
doc.updated_at = now
save(key, doc, tonumber(ARGV[10]))
return reply({ok = true})
