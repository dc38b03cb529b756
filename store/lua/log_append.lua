-- Append a flushed batch of events to a run's log stream in one call: entry ids are `0-<position>`.
-- KEYS[1]: the stream. ARGV[1]: the first position to keep (older entries are trimmed), ARGV[2]: TTL in ms,
-- then position, data, position, data, ...
local stream = KEYS[1]
for i = 3, #ARGV, 2 do
  redis.call('XADD', stream, '0-' .. ARGV[i], 'd', ARGV[i + 1])
end
redis.call('XTRIM', stream, 'MINID', '0-' .. ARGV[1])
redis.call('PEXPIRE', stream, ARGV[2])
return (#ARGV - 2) / 2
