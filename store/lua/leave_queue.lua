-- A queued run's client left: the run gives its place up (rules.leave_queue). ARGV[1]: {run_id}. Returns {ok}.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
if doc ~= nil and without_place(doc, arg.run_id) then redis.call('SET', key, cjson.encode(doc), 'KEEPTTL') end
return reply({ok = true})
