-- Admission in one atomic step: expire interrupts and reap a dead owner's lease, then check the binding,
-- run-id idempotency, busy and resume-required, then record the run id and take the lease (fence + 1).
-- KEYS[1] thread state. ARGV[1] admission JSON, ARGV[2] retention in ms.
local key, a, ttl = KEYS[1], cjson.decode(ARGV[1]), tonumber(ARGV[2])
local doc = load(key)
if doc == nil then
  doc = {thread_id = a.thread_id, updated_at = a.now, binding = NULL, runs = {}, active = NULL,
         execution = NULL, history = {}, fence = 0}
end
local expired, lost = expire_and_reap(doc, a.now)
local changed = not is_null(expired) or not is_null(lost)
local function refuse(code, field)
  if changed then save(key, doc, ttl) end
  return reply({error = code, field = field})
end
if not is_null(doc.binding) then
  if doc.binding.cwd ~= a.cwd then return refuse('THREAD_BINDING_CONFLICT', 'forwardedProps.iacCode.cwd') end
  local bound_user = doc.binding.user_id
  if is_null(bound_user) then bound_user = nil end
  local user = a.user_id
  if is_null(user) then user = nil end
  if bound_user ~= user then return refuse('THREAD_BINDING_CONFLICT', 'forwardedProps.iacCode.userId') end
end
local known = doc.runs[a.run_id]
if known ~= nil then
  if known.digest == a.digest then return refuse('DUPLICATE_RUN_ID', 'runId') end
  return refuse('RUN_ID_CONFLICT', 'runId')
end
if not is_null(doc.active) then return refuse('THREAD_BUSY', NULL) end
local cur = doc.execution
if not a.is_resume and not is_null(cur) and cur.status == 'interrupted' then return refuse('RESUME_REQUIRED', NULL) end
if is_null(doc.binding) then doc.binding = {cwd = a.cwd, user_id = a.user_id} end
if not a.is_resume then
  if not is_null(cur) then retire(doc, cur) end
  cur = {execution_id = a.new_execution_id, ros_invocation_id = a.ros_invocation_id, status = 'running',
         created_at = a.now, updated_at = a.now, pending = {}, applied = {}, answered_ids = {},
         checkpoint = NULL, open_steps = {}, sequence = 0, cancel_requested = false,
         context_id = NULL, task_id = NULL, session_id = NULL}
  doc.execution = cur
end
local execution_id = ''
if not is_null(cur) then execution_id = cur.execution_id end
doc.runs[a.run_id] = {digest = a.digest, execution_id = execution_id, at = a.now}
local ids = {}
for id, record in pairs(doc.runs) do table.insert(ids, {id = id, at = record.at}) end
if #ids > MAX_RUNS then
  table.sort(ids, function(x, y) return x.at < y.at end)
  for i = 1, #ids - MAX_RUNS do doc.runs[ids[i].id] = nil end
end
doc.fence = doc.fence + 1
doc.active = {run_id = a.run_id, execution_id = execution_id, owner = a.owner, started_at = a.now,
              lease_until = server_now() + a.lease_seconds, fence = doc.fence}
doc.updated_at = a.now
save(key, doc, ttl)
return reply({execution = cur, history = doc.history, expired = expired, lost = lost, fence = doc.fence})
