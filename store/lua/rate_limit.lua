-- Token bucket per caller, shared by all replicas: refills `rate` tokens per second up to `burst`;
-- a request takes one token or learns how long to wait.
-- KEYS[1] the caller's bucket. ARGV[1]: {rate (per second), burst}. Returns 0 when allowed, else seconds to wait.
local key, arg = KEYS[1], cjson.decode(ARGV[1])
local rate, burst = arg.rate, arg.burst
local now = server_now()
local bucket = redis.call('HMGET', key, 'tokens', 'at')
local tokens, at = tonumber(bucket[1]), tonumber(bucket[2])
if tokens == nil then tokens, at = burst, now end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', key, 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
