-- Slow consumers: subscriptions whose p95 ack latency exceeds slow_ms, or that left messages unacknowledged.
-- param slow_ms = 1000: p95 ack latency (ms) above which a consumer is slow
WITH per_consumer AS (
  SELECT
    session_id,
    subscription,
    destination,
    first(ack_mode, true) AS ack_mode,
    count(*) AS needing_ack,
    count_if(ack_outcome = 'none') AS unacked,
    percentile_approx(ack_latency_ms, 0.95, 10000) AS p95_ms,
    max(ack_latency_ms) AS max_ms
  FROM messages
  WHERE command = 'MESSAGE' AND coalesce(ack_outcome, 'none') <> 'auto'
  GROUP BY session_id, subscription, destination
)
SELECT
  c.session_id AS consumer_session,
  s.login,
  s.client_ip,
  s.client_port,
  c.subscription,
  c.destination,
  c.ack_mode,
  c.needing_ack,
  c.unacked,
  round(c.p95_ms, 3) AS p95_ms,
  round(c.max_ms, 3) AS max_ms,
  concat_ws(', ',
    CASE WHEN c.p95_ms > :slow_ms THEN 'p95 above ' || :slow_ms || ' ms' END,
    CASE WHEN c.unacked > 0 THEN c.unacked || ' never acknowledged' END) AS why
FROM per_consumer c
LEFT JOIN sessions s ON s.session_id = c.session_id
WHERE c.p95_ms > :slow_ms OR c.unacked > 0
ORDER BY c.p95_ms DESC NULLS LAST, c.unacked DESC
