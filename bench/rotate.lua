-- wrk script: POST the body files listed in $BENCH_BODIES (one path per line), a different one
-- per request in turn, and write a JSON summary to $BENCH_OUT (stdout when unset).
-- usage: BENCH_BODIES=list.txt BENCH_OUT=out.json wrk -t1 -c32 -d3s -s bench/rotate.lua URL
local requests = {}
local turn = 0

function init(args)
  local list = assert(io.open(os.getenv("BENCH_BODIES"), "r"), "cannot open BENCH_BODIES")
  local headers = {
    ["Content-Type"] = "application/json",
    ["x-api-key"] = "sk-ant-bench-fake-key",
    ["anthropic-version"] = "2023-06-01",
    ["User-Agent"] = "toolslim-bench-wrk/1",
  }
  -- Claude Code names its session in a header (proxy_bench.py --session-header)
  local session = os.getenv("BENCH_SESSION")
  if session and #session > 0 then
    headers["X-Claude-Code-Session-Id"] = session
  end
  for path in list:lines() do
    if #path > 0 then
      local f = assert(io.open(path, "rb"), "cannot open " .. path)
      -- pre-formatted once: request() then only picks the next one
      requests[#requests + 1] = wrk.format("POST", nil, headers, f:read("*a"))
      f:close()
    end
  end
  list:close()
  assert(#requests > 0, "BENCH_BODIES lists no files")
end

function request()
  turn = turn % #requests + 1
  return requests[turn]
end

function done(summary, latency, requests)
  local e = summary.errors
  local s = string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"lat_us":{"min":%d,"max":%d,"mean":%.1f,"p50":%d,"p90":%d,"p99":%d}}',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean,
    latency:percentile(50), latency:percentile(90), latency:percentile(99))
  local out = os.getenv("BENCH_OUT")
  if out and #out > 0 then
    local f = assert(io.open(out, "w"))
    f:write(s)
    f:close()
  else
    io.write(s .. "\n")
  end
end
