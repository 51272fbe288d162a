-- Ack latency percentiles (ms, MESSAGE to the ACK/NACK settling it) per consumer session and subscription.
SELECT
  m.session_id AS consumer_session,
  s.login,
  s.client_ip,
  s.client_port,
  m.subscription,
  m.destination,
  first(m.ack_mode, true) AS ack_mode,
  count(*) AS needing_ack,
  count(m.ack_latency_ms) AS settled,
  count_if(m.ack_outcome = 'ACK') AS acked,
  count_if(m.ack_outcome = 'NACK') AS nacked,
  count_if(m.ack_outcome = 'none') AS unacked,
  round(percentile_approx(m.ack_latency_ms, 0.5, 10000), 3) AS p50_ms,
  round(percentile_approx(m.ack_latency_ms, 0.9, 10000), 3) AS p90_ms,
  round(percentile_approx(m.ack_latency_ms, 0.99, 10000), 3) AS p99_ms,
  round(max(m.ack_latency_ms), 3) AS max_ms
FROM messages m
LEFT JOIN sessions s ON s.session_id = m.session_id
WHERE m.command = 'MESSAGE' AND coalesce(m.ack_outcome, 'none') <> 'auto'
GROUP BY m.session_id, s.login, s.client_ip, s.client_port, m.subscription, m.destination
ORDER BY p99_ms DESC NULLS FIRST, consumer_session, subscription
