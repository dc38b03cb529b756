-- The backend accepted the answers: only the fenced lease holder may drop the pending interrupts,
-- and it records each answer's digest so that a repeated answer is refused forever after.
-- KEYS[1] thread state. ARGV: run_id, execution_id, fence, applied JSON, now, retention ms.
local key = KEYS[1]
local doc = load(key)
local ex, err = owned_execution(doc, ARGV[1], ARGV[2], tonumber(ARGV[3]))
if ex == nil then return reply({error = err}) end
local now = tonumber(ARGV[5])
local answered = {}
for _, p in ipairs(arr(ex.pending)) do table.insert(answered, p.id) end
for i, id in ipairs(arr(ex.answered_ids)) do if i <= 64 then table.insert(answered, id) end end
ex.answered_ids = answered
ex.pending = {}
if is_null(ex.applied) or next(ex.applied) == nil then ex.applied = {} end
for id, digest in pairs(cjson.decode(ARGV[4])) do ex.applied[id] = digest end
ex.checkpoint = NULL
ex.open_steps = {}
ex.status = 'running'
ex.updated_at = now
doc.updated_at = now
save(key, doc, tonumber(ARGV[6]))
return reply({ok = true})
