-- The backend accepted the answers: only the fenced lease holder may drop the pending interrupts,
-- and it records each answer's digest so that a repeated answer is refused forever after.
-- ARGV[1]: {lease = {run_id, execution_id, fence}, applied = {interruptId: digest}}. Returns {ok} or {error, field}.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
local ex, err, field = owned_execution(doc, arg.lease)
if ex == nil then return refuse(err, field) end
local now = server_now()
ex.answered_ids = answered(ex)
ex.pending = {}
if is_null(ex.applied) or next(ex.applied) == nil then ex.applied = {} end
for id, digest in pairs(arg.applied) do ex.applied[id] = digest end
ex.checkpoint = NULL
ex.open_steps = {}
ex.status = 'running'
ex.updated_at = now
doc.updated_at = now
save(key, doc)
return reply({ok = true})
