-- A minimal STOMP dissector for tshark, the baseline of benchmarks/bench_run.py: Wireshark 4.0
-- has no STOMP dissector of its own. Frames end at the NUL after content-length body bytes
-- (or at the first NUL without one); a lone LF or CRLF is a heart-beat. Frames split across
-- segments are put together by tshark's TCP reassembly (desegment_len).
--
--   tshark -r F -X lua_script:benchmarks/stomp.lua -T fields -e stomp.command

local stomp = Proto("stomp", "STOMP")
local f_command = ProtoField.string("stomp.command", "Command")
stomp.fields = { f_command }

-- Length of the frame at `offset` and its command, or nil and the bytes still needed.
local function frame_at(tvb, offset)
  local available = tvb:len() - offset
  local first = tvb(offset, 1):uint()
  if first == 10 then
    return 1, "HEARTBEAT"
  end
  if first == 13 then
    if available < 2 then return nil, DESEGMENT_ONE_MORE_SEGMENT end
    return 2, "HEARTBEAT"
  end
  local text = tvb:raw(offset, available)
  local head_end = text:find("\n\n", 1, true)
  if not head_end then return nil, DESEGMENT_ONE_MORE_SEGMENT end
  local command = text:match("^([%u]+)") or "?"
  local length = text:sub(1, head_end):match("\ncontent%-length:(%d+)")
  local nul
  if length then
    nul = head_end + 2 + tonumber(length)
    if nul > available then return nil, nul - available end
  else
    nul = text:find("\0", head_end + 2, true)
    if not nul then return nil, DESEGMENT_ONE_MORE_SEGMENT end
  end
  -- EOLs right after the NUL end the frame (brokers send NUL LF): not heart-beats
  local after = text:find("[^\r\n]", nul + 1) or (available + 1)
  return after - 1, command
end

function stomp.dissector(tvb, pinfo, tree)
  local offset = 0
  local total = tvb:len()
  while offset < total do
    local length, what = frame_at(tvb, offset)
    if not length then
      pinfo.desegment_offset = offset
      pinfo.desegment_len = what
      return total
    end
    local item = tree:add(stomp, tvb(offset, length))
    item:add(f_command, tvb(offset, math.min(length, #what)), what)
    offset = offset + length
  end
  pinfo.cols.protocol = "STOMP"
  return total
end

DissectorTable.get("tcp.port"):add(61613, stomp)
