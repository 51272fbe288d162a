-- Sessions whose heart-beats came late beyond 1.5x or 2x the negotiated interval, per direction.
SELECT
  h.session_id,
  s.login,
  s.client_ip,
  s.client_port,
  h.direction,
  CASE h.direction WHEN 'c2s' THEN 'client' ELSE 'server' END AS late_side,
  max(h.expected_ms) AS expected_ms,
  count(*) AS beats,
  count_if(h.late_1_5x) AS late_1_5x,
  count_if(h.late_2x) AS late_2x,
  round(max(h.gap_ms), 3) AS max_gap_ms,
  round(max(h.gap_ms / h.expected_ms), 3) AS worst_ratio
FROM heartbeats h
LEFT JOIN sessions s ON s.session_id = h.session_id
WHERE h.expected_ms > 0
GROUP BY h.session_id, s.login, s.client_ip, s.client_port, h.direction
HAVING count_if(h.late_1_5x) > 0
ORDER BY late_2x DESC, late_1_5x DESC, worst_ratio DESC, h.session_id, h.direction
