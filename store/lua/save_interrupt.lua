-- Persist pending interrupts before RUN_FINISHED announces them, and release the lease. Refused for a
-- fenced-off (stale) owner and when a cancel intent was recorded meanwhile (the cancel wins).
-- ARGV[1]: {lease, pending (list, opaque members as JSON strings), checkpoint (JSON string), open_steps,
-- progress = {sequence, identities}}. Returns {ok} or {error, field}. ARGV[2], ARGV[3] (optional): the conversation
-- and summary, written to KEYS[2], KEYS[3] in the same step (KEYS[4]: the meta, kept as long).
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
local ex, err, field = owned_execution(doc, arg.lease)
if ex == nil then return refuse(err, field) end
if ex.cancel_requested then return refuse('CANCELLED') end
local now = server_now()
ex.status = 'interrupted'
ex.pending = arg.pending
ex.checkpoint = arg.checkpoint
ex.open_steps = arg.open_steps
ex.updated_at = now
apply_progress(ex, arg.progress)
doc.active = NULL
doc.updated_at = now
save(key, doc)
save_history()
return reply({ok = true})
