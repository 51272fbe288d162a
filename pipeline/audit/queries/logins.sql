-- Logins per user and client address: connections, accepted and refused logins, versions, first and last seen.
SELECT
  login,
  client_ip,
  count(*) AS connections,
  count(connected_at) AS accepted,
  count_if(connect_command IS NOT NULL AND connected_at IS NULL AND errors > 0) AS refused,
  array_join(array_sort(collect_set(version)), ',') AS versions,
  min(started_at) AS first_seen,
  max(ended_at) AS last_seen
FROM sessions
GROUP BY login, client_ip
ORDER BY connections DESC, login, client_ip
