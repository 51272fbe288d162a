-- Largest messages: the biggest SEND and MESSAGE bodies with where they went and who sent or got them.
-- param limit = 20: number of messages listed
SELECT
  m.body_length,
  m.command,
  m.destination,
  m.content_type,
  m.ts,
  m.message_id,
  s.login,
  s.client_ip,
  s.client_port,
  m.body_sha256,
  m.session_id
FROM messages m
LEFT JOIN sessions s ON s.session_id = m.session_id
ORDER BY m.body_length DESC, m.ts, m.session_id, m.frame_index
LIMIT :limit
