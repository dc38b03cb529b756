-- Admission in one atomic step: a repeated try of the same admission (same nonce) gets the grant it made;
-- otherwise expire interrupts and reap a dead owner's lease, then check the binding, run-id idempotency
-- (a recent run of the same request that never logged an event may be admitted again once its lease is free),
-- busy (refused, or queued: rules._queue and rules._turn) and resume-required, then record the run id and take
-- the lease (fence + 1).
-- KEYS[1]: the thread's state, KEYS[2]: the run's event log meta (only its existence is read).
-- ARGV[1]: {thread_id, run_id, digest, cwd, user_id, ros_invocation_id, is_resume, new_execution_id, owner,
--           nonce, restart_unstarted, multitask, max_queued, waiting, agent}.
-- Returns {execution, history, expired, fence}, {queued, stop_owner, stop_execution} or {error, field}.
local key, a = KEYS[1], cjson.decode(ARGV[1])
local now = server_now()
local doc = load(key)
if doc == nil then
  doc = {thread_id = a.thread_id, updated_at = now, binding = NULL, runs = {}, active = NULL,
         execution = NULL, history = {}, fence = 0, queue = {}}
end
local prior = doc.runs[a.run_id]
if prior ~= nil and a.nonce ~= '' and prior.nonce == a.nonce and not is_null(doc.active)
    and doc.active.run_id == a.run_id and doc.active.fence == prior.fence then
  return reply({execution = doc.execution, history = doc.history, expired = NULL, fence = prior.fence})
end
local expired, changed = expire_and_reap(doc, now)
if drop_stale_places(doc, now) then changed = true end
local function refused(reason, field)
  if changed then save(key, doc) end
  return refuse(reason, field)
end
local function refused_waiting(reason, field)
  if a.waiting and without_place(doc, a.run_id) then changed = true end
  return refused(reason, field)
end
if not is_null(doc.binding) then
  -- A plain request names no workspace (''): it never conflicts on one.
  if a.cwd ~= '' and doc.binding.cwd ~= a.cwd then return refused_waiting('THREAD_BINDING_CONFLICT', 'forwardedProps.iacCode.cwd') end
  local bound_user = doc.binding.user_id
  if is_null(bound_user) then bound_user = nil end
  local user = a.user_id
  if is_null(user) then user = nil end
  if bound_user ~= user then return refused_waiting('THREAD_BINDING_CONFLICT', 'forwardedProps.iacCode.userId') end
  -- The thread's agent: the agent of its first run, '' for the default agent (rules._check_binding).
  local bound_agent = doc.binding.agent
  if is_null(bound_agent) or bound_agent == nil then bound_agent = '' end
  if bound_agent ~= a.agent then return refused_waiting('THREAD_BINDING_CONFLICT', 'agentId') end
end
local known = doc.runs[a.run_id]
local unstarted = known ~= nil and a.restart_unstarted and known.digest == a.digest
    and redis.call('EXISTS', KEYS[2]) == 0 and now - known.at < RESTART_WINDOW
if unstarted then
  if not is_null(doc.active) and doc.active.run_id == a.run_id then return refused_waiting('THREAD_BUSY') end
elseif known ~= nil then
  if known.digest == a.digest then return refused_waiting('DUPLICATE_RUN_ID', 'runId') end
  return refused_waiting('RUN_ID_CONFLICT', 'runId')
end
local cur = doc.execution
local interrupted = not is_null(cur) and cur.status == 'interrupted'
local queue = arr(doc.queue)
if a.waiting then
  -- A queued run asking again (rules._turn): its turn, or its place renewed, or its place gone.
  local mine = nil
  for i, q in ipairs(queue) do if q.run_id == a.run_id then mine = i end end
  if mine == nil then return refused('DEQUEUED') end
  if not is_null(doc.active) or mine ~= 1 then
    queue[mine]['until'] = now + QUEUE_TICKET_SECONDS
    doc.queue = queue
    save(key, doc)
    return reply({queued = mine})
  end
  table.remove(queue, 1)
  doc.queue = queue
  changed = true
elseif not a.is_resume and (not is_null(doc.active) or #queue > 0) then
  -- A busy thread (rules._queue): refused, or queued; interrupt and rollback go first and stop the active run.
  if is_null(doc.active) and interrupted then return refused('RESUME_REQUIRED') end
  if a.multitask == 'reject' then return refused('THREAD_BUSY') end
  for _, q in ipairs(queue) do if q.run_id == a.run_id then return refused('DUPLICATE_RUN_ID', 'runId') end end
  if #queue >= a.max_queued then return refused('THREAD_BUSY') end
  local front = a.multitask == 'interrupt' or a.multitask == 'rollback'
  local place = #queue
  if front then
    place = 0
    for _, q in ipairs(queue) do if q.front then place = place + 1 end end
  end
  table.insert(queue, place + 1, {run_id = a.run_id, owner = a.owner, ['until'] = now + QUEUE_TICKET_SECONDS, front = front})
  doc.queue = queue
  local result = {queued = place + 1, stop_owner = NULL, stop_execution = ''}
  local active = doc.active
  if front and not is_null(active) and not is_null(cur) and cur.execution_id == active.execution_id
      and cur.status == 'running' then
    cur.cancel_requested = true
    cur.rollback = cur.rollback == true or a.multitask == 'rollback'
    result.stop_owner, result.stop_execution = active.owner, active.execution_id
  end
  save(key, doc)
  return reply(result)
elseif not is_null(doc.active) then
  return refused('THREAD_BUSY')
end
if not a.is_resume and interrupted then return refused_waiting('RESUME_REQUIRED') end
if is_null(doc.binding) then doc.binding = {cwd = a.cwd, user_id = a.user_id, agent = a.agent} end
if not a.is_resume then
  if not is_null(cur) then retire(doc, cur) end
  cur = {execution_id = a.new_execution_id, ros_invocation_id = a.ros_invocation_id, status = 'running',
         created_at = now, updated_at = now, pending = {}, applied = {}, answered_ids = {},
         checkpoint = NULL, open_steps = {}, sequence = 0, cancel_requested = false, rollback = false,
         context_id = NULL, task_id = NULL, session_id = NULL, agent = a.agent}
  doc.execution = cur
end
local execution_id = ''
if not is_null(cur) then execution_id = cur.execution_id end
doc.fence = doc.fence + 1
doc.runs[a.run_id] = {digest = a.digest, execution_id = execution_id, at = now, fence = doc.fence, nonce = a.nonce}
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
