-- Failed logins: connections answered by ERROR after CONNECT/STOMP, with no CONNECTED.
WITH first_error AS (
  SELECT session_id, min_by(struct(ts, ts_ns, message, connection_closed), ts_ns) AS e
  FROM errors
  GROUP BY session_id
)
SELECT
  s.started_at,
  s.login,
  s.client_ip,
  s.client_port,
  concat(s.server_ip, ':', s.server_port) AS broker,
  s.connect_command,
  s.accept_version,
  s.host,
  f.e.ts AS error_at,
  f.e.message AS error_message,
  round((f.e.ts_ns - s.started_at_ns) / 1e6, 3) AS error_after_ms,
  f.e.connection_closed AS closed_after_error,
  s.session_id
FROM sessions s
JOIN first_error f ON f.session_id = s.session_id
WHERE s.connect_command IS NOT NULL AND s.connected_at IS NULL
ORDER BY s.started_at, s.session_id
