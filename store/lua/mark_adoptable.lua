-- A live run says how another replica can pick it up (an opaque JSON record: identities, no secrets), or, with
-- `handoff`, gives its lease up at once so that another replica adopts it now (a drain's hand-off).
-- KEYS[1]: the thread's state. ARGV[1]: {lease, record?, handoff?}. Returns {ok, until}.
local key, a = KEYS[1], cjson.decode(ARGV[1])
local doc = load(key)
if not holds_lease(doc, a.lease) then return reply({ok = false}) end
if not is_null(a.record) then doc.active.adopt = a.record end
if a.handoff == true then
  if is_null(doc.active.adopt) then return reply({ok = false}) end
  doc.active.lease_until = server_now() - 0.001
  doc.active.handoff = true
end
redis.call('SET', key, cjson.encode(doc), 'KEEPTTL')
return reply({ok = true, ['until'] = doc.active.lease_until})
