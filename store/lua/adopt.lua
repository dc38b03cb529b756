-- Adoption of a live run whose owner stopped renewing (it died, or handed the run off while draining): when
-- the run left an adoption record and its lease has run out, the caller takes the lease with the next fence.
-- KEYS[1]: the thread's state. ARGV[1]: {owner, run_id, agents}: `agents`, the agents the caller declares (null:
-- any); a run of another agent is left to a replica that declares it, untouched.
-- Returns {status = "adopted", fence, execution_id, record, execution, until} | {status = "held", until} |
-- {status = "gone"} | {status = "foreign", agent}.
local key, a = KEYS[1], cjson.decode(ARGV[1])
local now = server_now()
local doc = load(key)
if doc == nil or is_null(doc.active) or is_null(doc.active.adopt) or doc.active.run_id ~= a.run_id then
  return reply({status = 'gone'})
end
local active = doc.active
if not is_null(a.agents) then
  local agent = cjson.decode(active.adopt).agent
  if type(agent) == 'string' and agent ~= '' then  -- a record from before agents were recorded: the default's
    local declared = false
    for _, id in ipairs(a.agents) do if id == agent then declared = true end end
    if not declared then return reply({status = 'foreign', agent = agent}) end
  end
end
if active.lease_until > now then return reply({status = 'held', ['until'] = active.lease_until}) end
if now - active.lease_until >= ADOPT_WINDOW then return reply({status = 'gone'}) end
doc.fence = doc.fence + 1
active.fence = doc.fence
active.owner = a.owner
active.lease_until = now + LEASE_SECONDS
active.handoff = NULL
active.adoptions = (active.adoptions or 0) + 1
doc.updated_at = now
save(key, doc)
return reply({status = 'adopted', fence = doc.fence, execution_id = active.execution_id, record = active.adopt,
              execution = doc.execution, ['until'] = active.lease_until})
