#!/usr/bin/env python3
"""The read API side by side: the median time of each method (repeated calls of the same
request on one keep-alive connection per node, the response read but not parsed), and whether
every node gave the same result. Usage: benches/read_methods.py PORT [PORT...] [--block N]
(nodes serving the same generated chain, e.g. loupe and reth; N default 2000; the first port's
answers pick the transaction and addresses)."""
import http.client
import json
import statistics
import sys
import time

args = sys.argv[1:]
block = 2000
if "--block" in args:
    i = args.index("--block")
    block = int(args[i + 1])
    del args[i : i + 2]
ports = [int(p) for p in args]
conns = {p: http.client.HTTPConnection("127.0.0.1", p) for p in ports}


def raw(port, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conns[port].request("POST", "/", body, {"Content-Type": "application/json"})
    return conns[port].getresponse().read()


def median_us(port, method, params, n):
    times = []
    for _ in range(n):
        started = time.perf_counter()
        raw(port, method, params)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


first = ports[0]
txs = json.loads(raw(first, "eth_getBlockByNumber", [hex(block), False]))["result"]["transactions"]
tx = txs[len(txs) // 2]
receipt = json.loads(raw(first, "eth_getTransactionReceipt", [tx]))["result"]
sender, to = receipt["from"], receipt["to"]
token = "0x6c6f757065000000000000000000000000000001"
holder = "0x" + sender[2:].rjust(64, "0")
b, b100 = hex(block), hex(block + 99)
cases = [
    ("eth_getBlockByNumber 0, hashes", "eth_getBlockByNumber", ["0x0", False], 300),
    (f"eth_getBlockByNumber {block}, hashes", "eth_getBlockByNumber", [b, False], 200),
    (f"eth_getBlockByNumber {block}, full", "eth_getBlockByNumber", [b, True], 50),
    ("eth_getTransactionByHash", "eth_getTransactionByHash", [tx], 300),
    ("eth_getTransactionByBlockNumberAndIndex", "eth_getTransactionByBlockNumberAndIndex", [b, "0x5"], 300),
    ("eth_getTransactionReceipt", "eth_getTransactionReceipt", [tx], 300),
    (f"eth_getBlockReceipts {block}", "eth_getBlockReceipts", [b], 50),
    ("eth_getBalance latest", "eth_getBalance", [sender, "latest"], 300),
    (f"eth_getBalance at {block}", "eth_getBalance", [sender, b], 300),
    (f"eth_getStorageAt at {block}", "eth_getStorageAt", [token, "0x0", b], 300),
    ("eth_getCode", "eth_getCode", [token, "latest"], 300),
    (f"eth_call balanceOf at {block}", "eth_call", [{"to": token, "data": "0x70a08231" + holder[2:]}, b], 300),
    ("eth_estimateGas transfer", "eth_estimateGas", [{"from": sender, "to": to, "value": "0x1"}, "latest"], 100),
    ("eth_getLogs 100 blocks, token + holder", "eth_getLogs", [{"fromBlock": b, "toBlock": b100, "address": token, "topics": [None, holder]}], 30),
    ("eth_getLogs 100 blocks, token", "eth_getLogs", [{"fromBlock": b, "toBlock": b100, "address": token}], 10),
    ("eth_getLogs 1,000 blocks, no match", "eth_getLogs", [{"fromBlock": hex(max(block - 1000, 0)), "toBlock": hex(block - 1), "address": "0x" + "ab" * 20}], 20),
    ("eth_getProof latest", "eth_getProof", [sender, [], "latest"], 200),
    ("eth_feeHistory 100, [25, 75]", "eth_feeHistory", ["0x64", "latest", [25, 75]], 30),
    ("eth_feeHistory 1,024, [50]", "eth_feeHistory", ["0x400", "latest", [50]], 5),
    ("eth_gasPrice", "eth_gasPrice", [], 300),
    ("trace_replayTransaction", "trace_replayTransaction", [tx, ["trace"]], 100),
    ("trace_transaction", "trace_transaction", [tx], 100),
    (f"trace_block {block}", "trace_block", [b], 10),
    ("debug_traceTransaction callTracer", "debug_traceTransaction", [tx, {"tracer": "callTracer"}], 100),
]
print(f"{'method':44s}" + "".join(f"{p:>10d}" for p in ports) + "  same")
for name, method, params, n in cases:
    answers = [json.loads(raw(p, method, params)) for p in ports]
    results = [a.get("result", ("error", a.get("error"))) for a in answers]
    same = all(r == results[0] for r in results)
    times = [median_us(p, method, params, n) for p in ports]
    marks = ["E" if "error" in a else " " for a in answers]
    print(f"{name:44s}" + "".join(f"{t:9.0f}{m}" for t, m in zip(times, marks)) + f"  {same}")
    sys.stdout.flush()
