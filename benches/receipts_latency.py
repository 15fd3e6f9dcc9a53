#!/usr/bin/env python3
"""Receipt read latency over HTTP: medians of eth_getTransactionReceipt (the middle transaction
of a block), eth_getBlockReceipts, a 100-block eth_getLogs by address, and the same narrowed to
one holder (the second topic of the first log found), on one keep-alive connection. Usage: benches/receipts_latency.py PORT [BLOCK] [ADDRESS]   (a node serving a
generated chain; BLOCK default 2000, ADDRESS default the generator's token)."""
import http.client
import json
import statistics
import sys
import time

port = int(sys.argv[1])
block = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
address = sys.argv[3] if len(sys.argv) > 3 else "0x6c6f757065000000000000000000000000000001"
conn = http.client.HTTPConnection("127.0.0.1", port)


def call(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn.request("POST", "/", body, {"Content-Type": "application/json"})
    answer = json.loads(conn.getresponse().read())
    if "result" not in answer:
        sys.exit(f"{method}: {answer}")
    return answer["result"]


def median_us(method, params, n):
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call(method, params)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1e6)


txs = call("eth_getBlockByNumber", [hex(block), False])["transactions"]
print(f"block {block}: {len(txs)} transactions")
print("eth_getTransactionReceipt p50 µs", median_us("eth_getTransactionReceipt", [txs[len(txs) // 2]], 300))
print("eth_getBlockReceipts p50 µs", median_us("eth_getBlockReceipts", [hex(block)], 100))
logs = {"fromBlock": hex(block), "toBlock": hex(block + 99), "address": address}
print("eth_getLogs 100 blocks p50 µs", median_us("eth_getLogs", [logs], 30))
found = call("eth_getLogs", [logs])
holder = next((l["topics"][1] for l in found if len(l["topics"]) > 1), None)
if holder:
    one = dict(logs, topics=[None, holder])
    n = len(call("eth_getLogs", [one]))
    print(f"eth_getLogs 100 blocks, one holder ({n} logs) p50 µs", median_us("eth_getLogs", [one], 30))
