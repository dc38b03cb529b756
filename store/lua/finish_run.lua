-- Release the lease of a finished run (only if this run still holds it, same fence); with a status the
-- execution ends and moves to the bounded history. A stale owner changes nothing.
-- ARGV[1]: {lease, status (or null: leave the execution as it is), progress}. Returns {ok, next}: next, the
-- owner of the thread's next queued run.
-- ARGV[2], ARGV[3] (optional): the thread's conversation and summary, written to KEYS[2], KEYS[3] with the end
-- (KEYS[4], the meta a client set, lives as long); never written for a stale owner. ARGV[4], ARGV[5] (optional):
-- the same as if the run had never run, written instead when a rollback run cancelled it.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
if not holds_lease(doc, arg.lease) then return reply({ok = false}) end
local now = server_now()
local ex = doc.execution
local rolled = not is_null(ex) and ex.execution_id == arg.lease.execution_id and ex.rollback == true
doc.active = NULL
doc.updated_at = now
if not is_null(arg.status) and not is_null(ex) and ex.execution_id == arg.lease.execution_id then
  apply_progress(ex, arg.progress)
  if not TERMINAL[ex.status] then end_execution(doc, ex, arg.status, now) end
end
save(key, doc)
save_history(rolled)
-- The replica holding the queue's next run, to wake at once (it looks on its own within a poll otherwise).
local queue, next_owner = arr(doc.queue), NULL
if #queue > 0 then next_owner = queue[1].owner end
return reply({ok = true, next = next_owner})
