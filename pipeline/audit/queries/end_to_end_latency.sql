-- End-to-end latency from a SEND to each MESSAGE that delivered it, where both were captured (matched on broker, destination, body hash and user headers).
--
-- A MESSAGE matches a SEND when it went through the same broker to the same destination with
-- the same body hash, and carries every user header of the SEND with the same value (brokers add
-- their own). Values are compared after STOMP unescaping, since RabbitMQ escapes headers even in
-- 1.0 sessions, which do not unescape; headers brokers set themselves are left out. Several SENDs
-- alike are paired in order: the n-th such MESSAGE of a subscription with the n-th such SEND.
-- SENDs of aborted or unfinished transactions are never delivered and are left out.
WITH who AS (
  SELECT session_id, concat(server_ip, ':', server_port) AS broker, login, client_ip
  FROM sessions
),
normalized AS (
  SELECT
    m.session_id, m.frame_index, m.command, m.ts, m.ts_ns, m.destination, m.body_sha256,
    m.subscription, m.message_id, m.transaction_outcome,
    w.broker, w.login, w.client_ip,
    array_sort(filter(
      transform(map_entries(m.user_headers), e -> named_struct(
        'key', e.key,
        'value', replace(replace(replace(replace(replace(
          e.value, '\\\\', chr(0)), '\\c', ':'), '\\n', chr(10)), '\\r', chr(13)), chr(0), '\\'))),
      e -> NOT array_contains(
        array('persistent', 'expires', 'priority', 'timestamp', 'redelivered',
              'redeliveryCounter', 'content-length', 'message-id'),
        e.key))) AS match_headers
  FROM messages m
  LEFT JOIN who w ON w.session_id = m.session_id
  WHERE m.destination IS NOT NULL
),
sends AS (
  SELECT *, row_number() OVER (
    PARTITION BY broker, destination, body_sha256, match_headers
    ORDER BY ts_ns, session_id, frame_index) AS send_rank
  FROM normalized
  WHERE command = 'SEND' AND coalesce(transaction_outcome, 'committed') = 'committed'
),
send_keys AS (
  SELECT DISTINCT broker, destination, body_sha256, match_headers FROM sends
),
deliveries AS (
  SELECT * FROM normalized WHERE command = 'MESSAGE'
),
chosen AS (
  -- the most specific SEND key each MESSAGE fits
  SELECT d.session_id, d.frame_index, max_by(k.match_headers, size(k.match_headers)) AS send_key
  FROM deliveries d
  JOIN send_keys k
    ON k.broker <=> d.broker AND k.destination = d.destination
   AND k.body_sha256 <=> d.body_sha256
   AND forall(k.match_headers, e -> array_contains(d.match_headers, e))
  GROUP BY d.session_id, d.frame_index
),
ranked AS (
  SELECT d.*, c.send_key, row_number() OVER (
    PARTITION BY d.broker, d.destination, d.body_sha256, c.send_key, d.session_id, d.subscription
    ORDER BY d.ts_ns, d.frame_index) AS delivery_rank
  FROM deliveries d
  JOIN chosen c ON c.session_id = d.session_id AND c.frame_index = d.frame_index
)
SELECT
  r.broker,
  r.destination,
  s.ts AS sent_at,
  r.ts AS delivered_at,
  round((r.ts_ns - s.ts_ns) / 1e6, 3) AS latency_ms,
  s.login AS producer_login,
  s.client_ip AS producer_ip,
  r.login AS consumer_login,
  r.client_ip AS consumer_ip,
  r.subscription,
  r.message_id,
  s.session_id AS producer_session,
  r.session_id AS consumer_session
FROM ranked r
JOIN sends s
  ON s.broker <=> r.broker AND s.destination = r.destination
 AND s.body_sha256 <=> r.body_sha256 AND s.match_headers = r.send_key
 AND s.send_rank = r.delivery_rank
WHERE s.ts_ns <= r.ts_ns
ORDER BY r.ts, r.session_id, r.frame_index
