// A real browser-style STOMP client: @stomp/stompjs over the `ws` package (npm), run by
// scripts/make_websocket_captures.py. Prints one JSON record of what it sent and received.
// argv: url login passcode destination deflate(0|1)
import { Client } from '@stomp/stompjs';
import WebSocket from 'ws';

const [url, login, passcode, destination, deflate] = process.argv.slice(2);
const record = { client: 'stompjs', sent: {}, received: {}, heart_beats_sent: 0,
  heart_beats_received: 0, message_ids: [], acked: [], nacked: [], receipts: [] };
const count = (side, command) => { record[side][command] = (record[side][command] || 0) + 1; };

const client = new Client({
  webSocketFactory: () => new WebSocket(url, ['v12.stomp', 'v11.stomp', 'v10.stomp'], {
    perMessageDeflate: deflate === '1',
    headers: { Origin: 'http://localhost:8000', 'User-Agent': 'stomp-lake-test stompjs' },
  }),
  connectHeaders: { login, passcode, host: '/' },
  heartbeatIncoming: 400,
  heartbeatOutgoing: 400,
  reconnectDelay: 0,
  logRawCommunication: true,
  debug: (line) => {
    // one '>>> ' line per frame sent (a binary SEND logs as an ArrayBuffer); frames received
    // are counted by the callbacks below, since one WebSocket message may hold several
    if (line.startsWith('>>> ')) {
      const body = line.slice(4);
      if (body === 'PING') record.heart_beats_sent += 1;
      else count('sent', body.startsWith('[object') ? 'SEND' : body.split('\n')[0]);
    } else if (line === '<<< PONG') {
      record.heart_beats_received += 1;
    }
  },
});

let delivered = 0;
client.onWebSocketClose = (event) => { record.close_code = event.code; };
client.onConnect = () => {
  count('received', 'CONNECTED');
  client.subscribe(destination, (message) => {
    delivered += 1;
    count('received', 'MESSAGE');
    record.message_ids.push(message.headers['message-id']);
    if (delivered === 2) { message.nack(); record.nacked.push(message.headers['message-id']); }
    else { message.ack(); record.acked.push(message.headers['message-id']); }
  }, { ack: 'client-individual', id: 'sub-0' });
  for (let n = 0; n < 3; n += 1) {
    client.publish({ destination, body: JSON.stringify({ n, text: 'x'.repeat(300) }) });
  }
  client.publish({ destination, binaryBody: new Uint8Array([0, 1, 2, 0, 255, 10, 0]),
    headers: { 'content-type': 'application/octet-stream' } });
  const receiptId = 'rcpt-1';
  client.watchForReceipt(receiptId, () => { count('received', 'RECEIPT'); record.receipts.push(receiptId); });
  client.publish({ destination, body: 'with receipt', headers: { receipt: receiptId } });
  setTimeout(() => client.deactivate().then(() => {
    setTimeout(() => { console.log(JSON.stringify(record)); process.exit(0); }, 200);
  }), 1600);
};
client.onStompError = (frame) => { count('received', 'ERROR'); };
client.activate();
