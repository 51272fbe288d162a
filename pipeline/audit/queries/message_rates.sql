-- Message rates per destination over time: SENDs and MESSAGEs per time bucket and per second.
-- param bucket_seconds = 60: width of a time bucket in seconds
SELECT
  timestamp_seconds(
    floor(unix_micros(ts) / (CAST(:bucket_seconds AS BIGINT) * 1000000)) * :bucket_seconds
  ) AS bucket_start,
  destination,
  count_if(command = 'SEND') AS sent,
  count_if(command = 'MESSAGE') AS delivered,
  sum(body_length) AS bytes,
  round(count_if(command = 'SEND') / :bucket_seconds, 3) AS sent_per_s,
  round(count_if(command = 'MESSAGE') / :bucket_seconds, 3) AS delivered_per_s
FROM messages
WHERE destination IS NOT NULL
GROUP BY 1, 2
ORDER BY bucket_start, destination
