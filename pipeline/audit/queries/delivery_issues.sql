-- Unacknowledged, NACKed and redelivered messages, one row per MESSAGE with what is wrong with it.
WITH flagged AS (
  SELECT
    m.*,
    m.ack_outcome = 'none' AS is_unacked,
    m.ack_outcome = 'NACK' AS is_nacked,
    lower(coalesce(try_element_at(m.user_headers, 'redelivered'), '')) = 'true'
      OR coalesce(try_cast(try_element_at(m.user_headers, 'redeliveryCounter') AS INT), 0) > 0
      AS is_redelivered
  FROM messages m
  WHERE m.command = 'MESSAGE'
)
SELECT
  concat_ws(',',
    CASE WHEN f.is_unacked THEN 'unacked' END,
    CASE WHEN f.is_nacked THEN 'nacked' END,
    CASE WHEN f.is_redelivered THEN 'redelivered' END) AS issue,
  f.ts AS delivered_at,
  f.destination,
  f.subscription,
  f.message_id,
  f.ack_mode,
  f.acked_at,
  round(f.ack_latency_ms, 3) AS ack_latency_ms,
  s.login,
  s.client_ip,
  s.client_port,
  f.session_id
FROM flagged f
LEFT JOIN sessions s ON s.session_id = f.session_id
WHERE f.is_unacked OR f.is_nacked OR f.is_redelivered
ORDER BY f.ts, f.session_id, f.frame_index
