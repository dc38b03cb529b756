-- One write to a run's event log, in one call: open it (meta), append a flushed batch, and/or end it.
-- KEYS[1]: the stream, KEYS[2]: the meta hash.
-- ARGV[1]: JSON {first_kept, live_ttl_ms, fence, from?, count?, meta?: {ros, digest, owner, execution, inputs}, end_head?,
--          retention_ms?, tombstone_ms?}; with events, ARGV[2]: their lengths ("12,40,..."), ARGV[3]: their data
--          end to end.
-- A batch is one stream entry, id 0-<its last position>, fields f (its first position), l and b (ARGV[2], ARGV[3]):
-- one XADD per batch and nothing per event here (a call per event was most of Redis's CPU for a run).
local stream, info = KEYS[1], KEYS[2]
local a = cjson.decode(ARGV[1])
-- Fencing: a writer older than the newest one seen (an adopter took the run over) writes nothing.
if a.fence and a.fence > 0 then
  local seen = tonumber(redis.call('HGET', info, 'fence') or '0')
  if a.fence < seen then return -1 end
  if a.fence > seen and not a.meta then redis.call('HSET', info, 'fence', tostring(a.fence)) end
end
if a.meta then
  redis.call('DEL', stream)
  redis.call('HSET', info, 'ros', a.meta.ros, 'digest', a.meta.digest, 'owner', a.meta.owner,
             'execution', a.meta.execution, 'ended', '0', 'fence', tostring(a.fence or 0), 'written', '0',
             'inputs', a.meta.inputs or '')
  redis.call('PEXPIRE', info, a.live_ttl_ms)
end
local count = a.count or 0
if count > 0 then
  -- A write repeated after its reply was lost adds nothing; one that overlaps what landed is added whole (its
  -- id is past the stream's top) and readers skip the positions they already have.
  local last = a.from + count - 1
  if last > tonumber(redis.call('HGET', info, 'written') or '0') then
    redis.call('XADD', stream, '0-' .. last, 'f', tostring(a.from), 'l', ARGV[2], 'b', ARGV[3])
    redis.call('HSET', info, 'written', tostring(last))
  end
  redis.call('XTRIM', stream, 'MINID', '0-' .. a.first_kept)
end
if a.end_head then
  redis.call('HSET', info, 'ended', '1', 'head', tostring(a.end_head))
  redis.call('PEXPIRE', info, a.tombstone_ms)
  if redis.call('EXISTS', stream) == 1 then redis.call('PEXPIRE', stream, a.retention_ms) end
elseif count > 0 then
  redis.call('PEXPIRE', stream, a.live_ttl_ms)
end
return count  -- -1: refused, the writer was fenced off
