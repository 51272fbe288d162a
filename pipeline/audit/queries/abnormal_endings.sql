-- Sessions ended by ERROR (an ERROR was the last frame) or by a TCP reset.
WITH last_error AS (
  SELECT session_id, max_by(message, ts_ns) AS message
  FROM errors
  GROUP BY session_id
)
SELECT
  s.end_reason,
  s.closed_by,
  s.ended_at,
  s.login,
  s.client_ip,
  s.client_port,
  concat(s.server_ip, ':', s.server_port) AS broker,
  s.connected_at IS NOT NULL AS was_connected,
  e.message AS last_error,
  round(s.duration_ms, 3) AS duration_ms,
  s.c2s_frames + s.s2c_frames AS frames,
  s.session_id
FROM sessions s
LEFT JOIN last_error e ON e.session_id = s.session_id
WHERE s.end_reason IN ('error', 'rst')
ORDER BY s.ended_at, s.session_id
