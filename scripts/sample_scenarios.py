"""Scripted stomp.py sessions, one function per bundled sample capture.

Each scenario waits on what the client saw (receipts, message counts, errors) rather
than sleeping, so a run produces the same frame counts every time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sample_recorder import RecordedConnection, open_connection

from tests.support.brokers import Broker

HEART_BEAT_RUN_S = 3.2
NOTE_NEEDING_ESCAPES = "path:/orders\nsecond line\\end"


@dataclass(slots=True)
class ScenarioResult:
    connections: list[RecordedConnection]
    # Still open when the capture stops; closed by make_samples afterwards.
    left_open: list[RecordedConnection] = field(default_factory=list)


Scenario = Callable[[Broker], ScenarioResult]


def json_body(kind: str, seq: int) -> str:
    return json.dumps(
        {
            "kind": kind,
            "seq": seq,
            "sku": f"SKU-{seq * 7 % 1000:04d}",
            "qty": seq % 5 + 1,
            "price": round(4.5 + seq * 1.25, 2),
            "tags": ["sample", kind],
        },
        sort_keys=True,
    )


def binary_body(seq: int, size: int = 96) -> bytes:
    """Deterministic bytes with NULs (first byte is always 0) and high bytes."""
    return bytes((i * 37 + seq * 11) % 256 if i else 0 for i in range(size))


def ack_id(message: dict[str, object], protocol: str) -> str:
    """The id an ACK/NACK must carry: the MESSAGE's `ack` header in 1.2, else message-id."""
    if protocol == "1.2" and message.get("ack"):
        return str(message["ack"])
    return str(message["message_id"])


def wait_heart_beat_run(started: float) -> None:
    remaining = HEART_BEAT_RUN_S - (time.monotonic() - started)
    if remaining > 0:
        time.sleep(remaining)


def activemq_queues_acks(broker: Broker) -> ScenarioResult:
    """1.2 client-individual consumer (ACK + one NACK), 1.1 client-mode consumer with
    cumulative ACKs, a 1.2 producer (JSON, binary, escaped header, receipts, SEND without
    destination), and a refused login."""
    orders = open_connection(broker, "orders-consumer-1.2", "1.2")
    orders.conn.subscribe(
        "/queue/orders", id="orders-sub", ack="client-individual", receipt="orders-sub-ok"
    )
    orders.wait_receipt("orders-sub-ok")
    batch = open_connection(broker, "batch-consumer-1.1", "1.1", connect_command="CONNECT")
    batch.conn.subscribe("/queue/batch", id="batch-sub", ack="client", receipt="batch-sub-ok")
    batch.wait_receipt("batch-sub-ok")

    producer = open_connection(broker, "producer-1.2", "1.2")
    send = producer.conn.send
    for seq in range(30):
        headers = {"x-seq": str(seq), "x-source": "make_samples"}
        if seq == 4:
            headers["x-note"] = NOTE_NEEDING_ESCAPES
        if seq % 10 == 0:
            headers["receipt"] = f"order-{seq}"
        if seq in (9, 19, 29):
            send("/queue/orders", binary_body(seq), "application/octet-stream", headers)
        else:
            send("/queue/orders", json_body("order", seq), "application/json", headers)
    for seq in range(20):
        send("/queue/batch", json_body("batch", seq), "application/json", {"x-seq": str(seq)})
    for seq in (0, 10, 20):
        producer.wait_receipt(f"order-{seq}")

    orders.wait_messages(30)
    messages = orders.record.messages_received
    for index, message in enumerate(messages):
        receipt = "orders-acked" if index == len(messages) - 1 else None
        if index == 6:
            orders.conn.nack(ack_id(message, "1.2"), receipt=receipt)
        else:
            orders.conn.ack(ack_id(message, "1.2"), receipt=receipt)
    orders.wait_receipt("orders-acked")

    batch.wait_messages(20)
    for index, message in enumerate(batch.record.messages_received):
        if index % 5 == 4:  # one cumulative ACK per five messages
            receipt = "batch-acked" if index == 19 else None
            batch.conn.ack(str(message["message_id"]), "batch-sub", receipt=receipt)
    batch.wait_receipt("batch-acked")

    producer.conn.send_frame(
        "SEND", {"content-type": "text/plain", "receipt": "no-destination"}, "lost"
    )
    producer.wait_errors(1)

    for connection in (orders, batch, producer):
        connection.disconnect()
    refused = open_connection(broker, "bad-login-1.2", "1.2", passcode="wrong-passcode")
    refused.wait_closed_by_server()
    return ScenarioResult([orders, batch, producer, refused])


def rabbitmq_topics_tx(broker: Broker) -> ScenarioResult:
    """1.0 session without accept-version (topic + client-ack queue), 1.1 producer with a
    committed and an aborted transaction, 1.2 consumer ACKing inside a transaction."""
    legacy = open_connection(broker, "legacy-1.0", "1.0", send_accept_version=False)
    legacy.conn.subscribe("/topic/prices", ack="auto", receipt="prices-sub-ok")
    legacy.conn.subscribe("/queue/audit-legacy", ack="client", receipt="legacy-sub-ok")
    legacy.wait_receipt("prices-sub-ok")
    legacy.wait_receipt("legacy-sub-ok")
    audit = open_connection(broker, "tx-consumer-1.2", "1.2")
    audit.conn.subscribe(
        "/queue/audit", id="audit-sub", ack="client-individual", receipt="audit-sub-ok"
    )
    audit.wait_receipt("audit-sub-ok")

    producer = open_connection(broker, "tx-producer-1.1", "1.1", connect_command="CONNECT")
    send = producer.conn.send
    for seq in range(25):
        headers = {"x-symbol": f"SYM{seq % 4}"}
        if seq in (0, 24):
            headers["receipt"] = f"price-{seq}"
        if seq == 3:
            headers["x-note"] = NOTE_NEEDING_ESCAPES
        send("/topic/prices", json_body("price", seq), "application/json", headers)
    for seq in range(5):
        send("/queue/audit-legacy", json_body("legacy", seq), "application/json")
    producer.conn.begin("tx-commit")
    for seq in range(5):
        headers = {"receipt": "tx-commit-send-2"} if seq == 2 else {}
        send(
            "/queue/audit",
            json_body("audit", seq),
            "application/json",
            headers,
            transaction="tx-commit",
        )
    producer.conn.commit("tx-commit", receipt="tx-commit-ok")
    producer.conn.begin("tx-abort")
    for seq in range(3):
        headers = {"receipt": "tx-abort-send-1"} if seq == 1 else {}
        send(
            "/queue/audit",
            json_body("discarded", seq),
            "application/json",
            headers,
            transaction="tx-abort",
        )
    producer.conn.abort("tx-abort", receipt="tx-abort-ok")
    producer.conn.send_frame("SEND", {"receipt": "no-destination"}, "lost")
    # RabbitMQ holds a transactional SEND's receipt until COMMIT and drops it on ABORT.
    for awaited in ("price-0", "price-24", "tx-commit-send-2", "tx-commit-ok", "tx-abort-ok"):
        producer.wait_receipt(awaited)
    producer.wait_errors(1)

    legacy.wait_messages(30)
    legacy_queue = [
        m for m in legacy.record.messages_received if m["destination"] == "/queue/audit-legacy"
    ]
    for index, message in enumerate(legacy_queue):
        receipt = "legacy-acked" if index == len(legacy_queue) - 1 else None
        legacy.conn.ack(str(message["message_id"]), receipt=receipt)
    legacy.wait_receipt("legacy-acked")

    audit.wait_messages(5)
    audit.conn.begin("tx-acks")
    for message in audit.record.messages_received:
        audit.conn.ack(ack_id(message, "1.2"), transaction="tx-acks")
    audit.conn.commit("tx-acks", receipt="tx-acks-ok")
    audit.wait_receipt("tx-acks-ok")

    for connection in (legacy, audit, producer):
        connection.disconnect()
    return ScenarioResult([legacy, audit, producer])


def activemq_heartbeat_v10(broker: Broker) -> ScenarioResult:
    """1.2 heart-beats 500,500 both ways for ~3 s, a 1.1 session asking only the broker to
    beat, and a 1.0 session without accept-version doing topic and client-ack traffic."""
    beating = open_connection(broker, "heartbeat-1.2", "1.2", heart_beats=(500, 500))
    started = time.monotonic()
    server_only = open_connection(broker, "heartbeat-1.1-server-only", "1.1", heart_beats=(0, 1000))
    legacy = open_connection(broker, "legacy-1.0", "1.0", send_accept_version=False)
    legacy.conn.subscribe("/topic/news", ack="auto", receipt="news-sub-ok")
    legacy.conn.subscribe("/queue/legacy", ack="client", receipt="legacy-sub-ok")
    legacy.wait_receipt("news-sub-ok")
    legacy.wait_receipt("legacy-sub-ok")
    for seq in range(20):
        legacy.conn.send("/topic/news", json_body("news", seq), headers={"x-seq": str(seq)})
    for seq in range(5):
        legacy.conn.send("/queue/legacy", json_body("legacy", seq), receipt=f"legacy-{seq}")
    legacy.wait_messages(25)
    queued = [m for m in legacy.record.messages_received if m["destination"] == "/queue/legacy"]
    for index, message in enumerate(queued):
        receipt = "legacy-acked" if index == len(queued) - 1 else None
        legacy.conn.ack(str(message["message_id"]), receipt=receipt)
    legacy.wait_receipt("legacy-acked")
    legacy.disconnect()

    wait_heart_beat_run(started)
    beating.disconnect()
    server_only.disconnect()
    return ScenarioResult([beating, server_only, legacy])


def rabbitmq_heartbeat_errors(broker: Broker) -> ScenarioResult:
    """1.2 heart-beats 500,500 for ~3 s, a refused 1.1 login, a 1.2 client-mode queue session
    (cumulative ACKs, NACK with requeue:false, binary bodies), and a session left open."""
    # RabbitMQ answers a bad login with ERROR at once but closes only ~10 s later: start it
    # first and collect the close at the end.
    refused = open_connection(broker, "bad-login-1.1", "1.1", passcode="wrong-passcode")
    beating = open_connection(broker, "heartbeat-1.2", "1.2", heart_beats=(500, 500))
    started = time.monotonic()

    jobs = open_connection(broker, "jobs-1.2", "1.2")
    jobs.conn.subscribe("/queue/jobs", id="jobs-sub", ack="client", receipt="jobs-sub-ok")
    jobs.wait_receipt("jobs-sub-ok")
    for seq in range(22):
        headers = {"x-seq": str(seq), "priority": str(seq % 3)}
        if seq % 5 == 0:
            headers["receipt"] = f"job-{seq}"
        if seq in (7, 15):
            jobs.conn.send("/queue/jobs", binary_body(seq), "application/octet-stream", headers)
        else:
            jobs.conn.send("/queue/jobs", json_body("job", seq), "application/json", headers)
    jobs.wait_messages(22)
    for seq in range(0, 22, 5):
        jobs.wait_receipt(f"job-{seq}")
    received = jobs.record.messages_received
    jobs.conn.ack(ack_id(received[9], "1.2"))  # cumulative: messages 0-9
    jobs.conn.ack(ack_id(received[21], "1.2"), receipt="jobs-acked")  # 10-21
    jobs.wait_receipt("jobs-acked")
    jobs.conn.send("/queue/jobs", json_body("poison", 99), "application/json", receipt="poison")
    jobs.wait_messages(23)
    jobs.wait_receipt("poison")
    jobs.conn.nack(ack_id(received[22], "1.2"), receipt="poison-nacked", requeue="false")
    jobs.wait_receipt("poison-nacked")

    still_open = open_connection(broker, "left-open-1.2", "1.2")
    still_open.conn.subscribe("/topic/alerts", id="alerts-sub", receipt="alerts-sub-ok")
    still_open.wait_receipt("alerts-sub-ok")
    still_open.conn.send(
        "/topic/alerts", json_body("alert", 1), "application/json", receipt="alert-1"
    )
    still_open.wait_messages(1)
    still_open.wait_receipt("alert-1")

    jobs.disconnect()
    wait_heart_beat_run(started)
    beating.disconnect()
    refused.wait_closed_by_server(timeout=30)
    return ScenarioResult([refused, beating, jobs, still_open], left_open=[still_open])


def rabbitmq_websocket(broker: Broker) -> ScenarioResult:
    """STOMP 1.2 over WebSocket (rabbitmq_web_stomp, path /ws) with stomp.py's
    WSStompConnection: a client-individual consumer beating 500,500 (ACKs, one NACK), a
    producer with receipts, a committed transaction and a SEND without destination."""
    consumer = open_connection(
        broker, "ws-consumer-1.2", "1.2", heart_beats=(500, 500), websocket=True
    )
    started = time.monotonic()
    consumer.conn.subscribe(
        "/queue/ws-orders", id="ws-orders-sub", ack="client-individual", receipt="ws-sub-ok"
    )
    consumer.wait_receipt("ws-sub-ok")

    producer = open_connection(broker, "ws-producer-1.2", "1.2", websocket=True)
    send = producer.conn.send
    for seq in range(10):
        headers = {"x-seq": str(seq)}
        if seq % 4 == 0:
            headers["receipt"] = f"ws-order-{seq}"
        if seq == 5:
            headers["x-note"] = NOTE_NEEDING_ESCAPES
        send("/queue/ws-orders", json_body("ws-order", seq), "application/json", headers)
    producer.conn.begin("ws-tx")
    for seq in range(10, 12):
        body = json_body("ws-order", seq)
        send("/queue/ws-orders", body, "application/json", transaction="ws-tx")
    producer.conn.commit("ws-tx", receipt="ws-tx-ok")
    producer.conn.send_frame("SEND", {"receipt": "no-destination"}, "lost")
    for awaited in ("ws-order-0", "ws-order-4", "ws-order-8", "ws-tx-ok"):
        producer.wait_receipt(awaited)
    producer.wait_errors(1)

    consumer.wait_messages(12)
    messages = consumer.record.messages_received
    for index, message in enumerate(messages):
        receipt = "ws-acked" if index == len(messages) - 1 else None
        if index == 3:
            consumer.conn.nack(ack_id(message, "1.2"), receipt=receipt, requeue="false")
        else:
            consumer.conn.ack(ack_id(message, "1.2"), receipt=receipt)
    consumer.wait_receipt("ws-acked")

    producer.disconnect()
    wait_heart_beat_run(started)
    consumer.disconnect()
    return ScenarioResult([consumer, producer])
