-- Producers and consumers per destination: sessions sending to it, sessions subscribed to or receiving from it, message counts.
WITH activity AS (
  SELECT session_id, destination, 1 AS sent, 0 AS delivered, body_length AS bytes_sent,
         false AS consumes
  FROM messages WHERE command = 'SEND' AND destination IS NOT NULL
  UNION ALL
  SELECT session_id, destination, 0, 1, 0, true
  FROM messages WHERE command = 'MESSAGE'
  UNION ALL
  SELECT session_id, destination, 0, 0, 0, true
  FROM subscriptions
)
SELECT
  concat(s.server_ip, ':', s.server_port) AS broker,
  a.destination,
  count(DISTINCT CASE WHEN a.sent = 1 THEN a.session_id END) AS producers,
  count(DISTINCT CASE WHEN a.consumes THEN a.session_id END) AS consumers,
  sum(a.sent) AS messages_sent,
  sum(a.delivered) AS messages_delivered,
  sum(a.bytes_sent) AS bytes_sent,
  array_join(slice(array_sort(collect_set(CASE WHEN a.sent = 1
    THEN concat(coalesce(s.login, '?'), '@', coalesce(s.client_ip, '?')) END)), 1, 5), ' ')
    AS producer_clients,
  array_join(slice(array_sort(collect_set(CASE WHEN a.consumes
    THEN concat(coalesce(s.login, '?'), '@', coalesce(s.client_ip, '?')) END)), 1, 5), ' ')
    AS consumer_clients
FROM activity a
LEFT JOIN sessions s ON s.session_id = a.session_id
GROUP BY 1, 2
ORDER BY messages_sent + messages_delivered DESC, broker, destination
