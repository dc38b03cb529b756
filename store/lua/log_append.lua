-- One write to a run's event log, in one call: open it (meta), append a flushed batch, and/or end it.
-- KEYS[1]: the stream, KEYS[2]: the meta hash.
-- ARGV[1]: JSON {first_kept, live_ttl_ms, meta?: {ros, digest, owner, execution}, end_head?, retention_ms?,
--          tombstone_ms?}; then position, data, position, data, ...
local stream, info = KEYS[1], KEYS[2]
local a = cjson.decode(ARGV[1])
if a.meta then
  redis.call('DEL', stream)
  redis.call('HSET', info, 'ros', a.meta.ros, 'digest', a.meta.digest, 'owner', a.meta.owner,
             'execution', a.meta.execution, 'ended', '0')
  redis.call('PEXPIRE', info, a.live_ttl_ms)
end
for i = 2, #ARGV, 2 do
  redis.call('XADD', stream, '0-' .. ARGV[i], 'd', ARGV[i + 1])
end
if #ARGV > 1 then
  redis.call('XTRIM', stream, 'MINID', '0-' .. a.first_kept)
end
if a.end_head then
  redis.call('HSET', info, 'ended', '1', 'head', tostring(a.end_head))
  redis.call('PEXPIRE', info, a.tombstone_ms)
  if redis.call('EXISTS', stream) == 1 then redis.call('PEXPIRE', stream, a.retention_ms) end
elseif #ARGV > 1 then
  redis.call('PEXPIRE', stream, a.live_ttl_ms)
end
return (#ARGV - 1) / 2
