-- Shared helpers, prepended to every script of this folder (Lua scripts cannot import). The Python side
-- prepends the bounds first (MAX_RUNS, MAX_HISTORY, MAX_ANSWERED, RETENTION_MS, LEASE_SECONDS, from
-- store/limits.py and the store's settings). Every script takes KEYS[1], the thread state, and one
-- argument, ARGV[1]: a JSON object with named fields. Time is always the Redis server's clock.
-- The thread state is one JSON document per thread (the ThreadState layout of store/records.py);
-- opaque values (interrupt wire form, response schema, backend checkpoint) are JSON strings inside it,
-- so cjson never rewrites them. cjson turns empty arrays into {}: the Python side reads both as [].
local NULL = cjson.null
local TERMINAL = {completed = true, failed = true, cancelled = true, expired = true, lost = true}

local function is_null(v) return v == nil or v == NULL end
local function arr(t) if is_null(t) then return {} end return t end

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function load(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function save(key, doc)
  redis.call('SET', key, cjson.encode(doc), 'PX', RETENTION_MS)
end

-- A run's end writes the thread's conversation and summary beside its state, in the same script (KEYS[2..4]);
-- `rolled`: the run was cancelled by a rollback run, and ARGV[4], ARGV[5] (when sent) are the conversation and
-- summary as if it had never run.
local function save_history(rolled)
  if ARGV[2] == nil then return end
  local conversation, summary = ARGV[2], ARGV[3]
  if rolled and ARGV[4] ~= nil then conversation, summary = ARGV[4], ARGV[5] end
  redis.call('SET', KEYS[2], conversation, 'PX', RETENTION_MS)
  redis.call('SET', KEYS[3], summary, 'PX', RETENTION_MS)
  redis.call('PEXPIRE', KEYS[4], RETENTION_MS)
end

local function copy(value) return cjson.decode(cjson.encode(value)) end

local function retire(doc, ex)
  ex.pending = {}
  ex.checkpoint = NULL
  ex.open_steps = {}
  local kept = {}
  for _, e in ipairs(arr(doc.history)) do
    if e.execution_id ~= ex.execution_id then table.insert(kept, e) end
  end
  while #kept > MAX_HISTORY - 1 do table.remove(kept, 1) end
  table.insert(kept, ex)
  doc.history = kept
  if not is_null(doc.execution) and doc.execution.execution_id == ex.execution_id then doc.execution = NULL end
end

-- The pending ids first, then the older answered ids, bounded (rules._answered).
local function answered(ex)
  local ids = {}
  for _, p in ipairs(arr(ex.pending)) do table.insert(ids, p.id) end
  for _, i in ipairs(arr(ex.answered_ids)) do table.insert(ids, i) end
  while #ids > MAX_ANSWERED do table.remove(ids) end
  return ids
end

local function end_execution(doc, ex, status, now)
  local ended = copy(ex)
  if status == 'expired' or status == 'cancelled' then ex.answered_ids = answered(ex) end
  ex.status = status
  ex.updated_at = now
  retire(doc, ex)
  return ended
end

-- Expire overdue interrupts and free a lease that ran out; returns (expired execution or NULL, changed).
local function expire_and_reap(doc, now)
  local expired, changed = NULL, false
  local cur = doc.execution
  if not is_null(cur) and cur.status == 'interrupted' then
    for _, p in ipairs(arr(cur.pending)) do
      if not is_null(p.expires_at) and p.expires_at <= now then
        expired = end_execution(doc, cur, 'expired', now)
        changed = true
        break
      end
    end
  end
  local active = doc.active
  -- An adoptable run whose owner stopped renewing is left to an adopter for ADOPT_WINDOW seconds.
  local adoptable = not is_null(active) and not is_null(active.adopt) and now - active.lease_until < ADOPT_WINDOW
  if not is_null(active) and active.lease_until <= now and not adoptable then
    doc.active = NULL
    changed = true
    cur = doc.execution
    if not is_null(cur) and cur.execution_id == active.execution_id and cur.status == 'running' then
      end_execution(doc, cur, 'lost', now)
    end
  end
  return expired, changed
end

-- Forget queued runs whose replica stopped renewing their place (rules.drop_stale_places); returns changed.
local function drop_stale_places(doc, now)
  local kept, queue = {}, arr(doc.queue)
  for _, q in ipairs(queue) do
    if q['until'] > now then table.insert(kept, q) end
  end
  doc.queue = kept
  return #kept ~= #queue
end

local function without_place(doc, run_id)
  local kept, queue = {}, arr(doc.queue)
  for _, q in ipairs(queue) do
    if q.run_id ~= run_id then table.insert(kept, q) end
  end
  doc.queue = kept
  return #kept ~= #queue
end

-- A thread bound to a userId takes that userId only: true when `asked` is another (cancel, stop).
local function binds_other_user(doc, asked)
  if is_null(doc.binding) then return false end
  local bound = doc.binding.user_id
  if is_null(bound) then bound = nil end
  if is_null(asked) then asked = nil end
  return bound ~= asked
end

local function holds_lease(doc, lease)
  return doc ~= nil and not is_null(doc.active) and doc.active.run_id == lease.run_id and doc.active.fence == lease.fence
end

-- The execution a run may still write to: it must hold the lease with the same fence.
local function owned_execution(doc, lease)
  if not holds_lease(doc, lease) then return nil, 'LEASE_LOST', 'runId' end
  local ex = doc.execution
  if is_null(ex) or ex.execution_id ~= lease.execution_id then return nil, 'LEASE_LOST', 'executionId' end
  return ex, nil, nil
end

local function apply_progress(ex, progress)
  ex.sequence = progress.sequence
  local identities = progress.identities
  if identities.contextId then ex.context_id = identities.contextId end
  if identities.taskId then ex.task_id = identities.taskId end
  if identities.sessionId then ex.session_id = identities.sessionId end
end

local function find_execution(doc, execution_id)
  if not is_null(doc.execution) and doc.execution.execution_id == execution_id then return doc.execution end
  for _, e in ipairs(arr(doc.history)) do
    if e.execution_id == execution_id then return e end
  end
  return nil
end

local function reply(value) return cjson.encode(value) end
local function refuse(reason, field) return reply({error = reason, field = field or NULL}) end
