-- Admission in one atomic step: expire interrupts and reap a dead owner's lease, then check the binding,
-- run-id idempotency, busy and resume-required, then record the run id and take the lease (fence + 1).
-- ARGV[1]: {thread_id, run_id, digest, cwd, user_id, ros_invocation_id, is_resume, new_execution_id, owner}.
-- Returns {execution, history, expired, fence} or {error, field}.
local key, a = KEYS[1], cjson.decode(ARGV[1])
local now = server_now()
local doc = load(key)
if doc == nil then
  doc = {thread_id = a.thread_id, updated_at = now, binding = NULL, runs = {}, active = NULL,
         execution = NULL, history = {}, fence = 0}
end
local expired, changed = expire_and_reap(doc, now)
local function refused(reason, field)
  if changed then save(key, doc) end
  return refuse(reason, field)
end
if not is_null(doc.binding) then
  if doc.binding.cwd ~= a.cwd then return refused('THREAD_BINDING_CONFLICT', 'forwardedProps.iacCode.cwd') end
  local bound_user = doc.binding.user_id
  if is_null(bound_user) then bound_user = nil end
  local user = a.user_id
  if is_null(user) then user = nil end
  if bound_user ~= user then return refused('THREAD_BINDING_CONFLICT', 'forwardedProps.iacCode.userId') end
end
local known = doc.runs[a.run_id]
if known ~= nil then
  if known.digest == a.digest then return refused('DUPLICATE_RUN_ID', 'runId') end
  return refused('RUN_ID_CONFLICT', 'runId')
end
if not is_null(doc.active) then return refused('THREAD_BUSY') end
local cur = doc.execution
if not a.is_resume and not is_null(cur) and cur.status == 'interrupted' then return refused('RESUME_REQUIRED') end
if is_null(doc.binding) then doc.binding = {cwd = a.cwd, user_id = a.user_id} end
if not a.is_resume then
  if not is_null(cur) then retire(doc, cur) end
  cur = {execution_id = a.new_execution_id, ros_invocation_id = a.ros_invocation_id, status = 'running',
         created_at = now, updated_at = now, pending = {}, applied = {}, answered_ids = {},
         checkpoint = NULL, open_steps = {}, sequence = 0, cancel_requested = false,
         context_id = NULL, task_id = NULL, session_id = NULL}
  doc.execution = cur
end
local execution_id = ''
if not is_null(cur) then execution_id = cur.execution_id end
doc.fence = doc.fence + 1
doc.runs[a.run_id] = {digest = a.digest, execution_id = execution_id, at = now, fence = doc.fence}
-- Keep the MAX_RUNS newest run records: the lowest fence goes first (rules._record_run).
local ids = {}
for id, record in pairs(doc.runs) do table.insert(ids, {id = id, fence = record.fence or 0}) end
if #ids > MAX_RUNS then
  table.sort(ids, function(x, y) return x.fence < y.fence end)
  for i = 1, #ids - MAX_RUNS do doc.runs[ids[i].id] = nil end
end
doc.active = {run_id = a.run_id, execution_id = execution_id, owner = a.owner, started_at = now,
              lease_until = now + LEASE_SECONDS, fence = doc.fence}
doc.updated_at = now
save(key, doc)
return reply({execution = cur, history = doc.history, expired = expired, fence = doc.fence})
