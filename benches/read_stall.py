#!/usr/bin/env python3
"""Point-read latency behind slow reads: HEAVY clients loop an eth_getLogs over blocks 1..TO
(the generator's token and one holder), while one client times eth_blockNumber (a 2-ms pause
between calls) on its own keep-alive connection. Prints the heavy calls' count and median and
eth_blockNumber's p50, p99 and max. Usage: benches/read_stall.py PORT HEAVY [SECONDS] [TO]
(a node serving a generated chain)."""
import http.client
import json
import statistics
import sys
import threading
import time

port, heavy = int(sys.argv[1]), int(sys.argv[2])
secs = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
to = int(sys.argv[4]) if len(sys.argv) > 4 else 10_000
token = "0x6c6f757065000000000000000000000000000001"
holder = "0x" + "00" * 12 + "11056ff1" + "00" * 16
logs = {"fromBlock": "0x1", "toBlock": hex(to), "address": token, "topics": [None, holder]}
heavy_body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [logs]})
point_body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []})
stop = time.time() + secs
heavy_times = []


def post(conn, body):
    conn.request("POST", "/", body, {"Content-Type": "application/json"})
    answer = conn.getresponse().read()
    if b'"result"' not in answer:
        sys.exit(f"error answer: {answer[:200]!r}")


def heavy_client():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.time() < stop:
        started = time.perf_counter()
        post(conn, heavy_body)
        heavy_times.append(time.perf_counter() - started)


threads = [threading.Thread(target=heavy_client) for _ in range(heavy)]
for t in threads:
    t.start()
time.sleep(0.2)
conn = http.client.HTTPConnection("127.0.0.1", port)
lat = []
while time.time() < stop:
    started = time.perf_counter()
    post(conn, point_body)
    lat.append(time.perf_counter() - started)
    time.sleep(0.002)
for t in threads:
    t.join()
lat.sort()
heavy_med = f"{statistics.median(heavy_times) * 1e3:.1f} ms" if heavy_times else "-"
print(
    f"heavy clients {heavy}: {len(heavy_times)} eth_getLogs, median {heavy_med}; "
    f"eth_blockNumber n={len(lat)} p50 {lat[len(lat) // 2] * 1e6:.0f} µs "
    f"p99 {lat[int(len(lat) * 0.99)] * 1e6:.0f} µs max {lat[-1] * 1e3:.1f} ms"
)
