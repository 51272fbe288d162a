-- Protocol violations by client: STOMP-level anomalies per client address, login and kind.
SELECT
  s.client_ip,
  s.login,
  a.kind,
  count(*) AS occurrences,
  count(DISTINCT a.session_id) AS sessions,
  min(a.ts) AS first_seen,
  max(a.ts) AS last_seen,
  min(a.detail) AS example
FROM anomalies a
LEFT JOIN sessions s ON s.session_id = a.session_id
WHERE a.source = 'stomp'
GROUP BY s.client_ip, s.login, a.kind
ORDER BY occurrences DESC, s.client_ip, s.login, a.kind
