"""web3.py against a loupe dev chain (run by tests/clients.rs).

Usage: web3py_check.py '<json>' where the JSON holds the node URL and the sample-history
addresses (README's table). Prints one JSON line `{"stage": "static", ...}` with what web3.py
returned for get_logs, estimate_gas, fee_history and get_proof (plus the results of verifying
each proof against the block's stateRoot with the Merkle-Patricia verifier below), then one line
`{"stage": "ready", ...}` once its filters are installed and polled empty. It then waits for a
line on stdin (the Rust side builds new blocks into the served datadir meanwhile) and prints
`{"stage": "filters", ...}` with what get_new_entries returned after the new blocks, and after
one more poll.

The script only reports; tests/clients.rs decides what is right.
"""

import json
import sys

import rlp
from eth_utils import keccak, to_checksum_address
from web3 import Web3
from web3.providers.rpc import HTTPProvider

TOKEN_ABI = [
    {
        "type": "event",
        "name": "Transfer",
        "anonymous": False,
        "inputs": [
            {"name": "from", "type": "address", "indexed": True},
            {"name": "to", "type": "address", "indexed": True},
            {"name": "value", "type": "uint256", "indexed": False},
        ],
    },
    {
        "type": "function",
        "name": "transfer",
        "stateMutability": "nonpayable",
        "inputs": [{"name": "to", "type": "address"}, {"name": "value", "type": "uint256"}],
        "outputs": [{"name": "", "type": "bool"}],
    },
]


class RecordingProvider(HTTPProvider):
    """HTTPProvider that remembers each method called and any JSON-RPC error returned."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def make_request(self, method, params):
        response = super().make_request(method, params)
        entry = {"method": method}
        if isinstance(response, dict) and "error" in response:
            entry["params"] = json.loads(Web3.to_json(params)) if params else params
            entry["error"] = response["error"]
        self.calls.append(entry)
        return response


# --- A minimal Merkle-Patricia proof verifier (independent of loupe and of web3.py) ----------


def nibbles(b):
    out = []
    for x in b:
        out += [x >> 4, x & 15]
    return out


def hp_decode(path):
    """Hex-prefix decoding: (nibbles, is_leaf)."""
    n = nibbles(path)
    flag = n[0]
    is_leaf = flag >= 2
    return (n[1:] if flag % 2 == 1 else n[2:]), is_leaf


def verify_proof(root, key, proof):
    """The value at `key` (already hashed) under `root`, proven by `proof` (RLP nodes, root
    first); None when the proof shows the key absent. Raises ValueError on a bad proof."""
    want = nibbles(key)
    nodes = [bytes(p) for p in proof]
    expected = root  # a 32-byte hash, or an inline node (decoded list)
    i = 0
    depth = 0
    while True:
        if isinstance(expected, list):
            node = expected
        else:
            if depth >= len(nodes):
                raise ValueError("proof ends early")
            raw = nodes[depth]
            depth += 1
            if keccak(raw) != expected:
                raise ValueError(f"node {depth - 1} does not hash to its reference")
            node = rlp.decode(raw)
        if len(node) == 17:
            if i == len(want):
                return node[16] or None
            child = node[want[i]]
            i += 1
            if child == b"":
                return None
            expected = child
        elif len(node) == 2:
            path, is_leaf = hp_decode(node[0])
            if want[i : i + len(path)] != path:
                return None
            i += len(path)
            if is_leaf:
                if i != len(want):
                    return None
                return node[1]
            expected = node[1]
        else:
            raise ValueError(f"node with {len(node)} items")
        if not isinstance(expected, list) and len(expected) != 32:
            # A reference shorter than 32 bytes is the node itself, RLP-encoded inline.
            expected = rlp.decode(expected) if isinstance(expected, bytes) else expected
        if depth > 64:
            raise ValueError("proof too deep")


def check_proof(w3, proof, block):
    """Verifies an eth_getProof result (web3.py's AttributeDict) against `block`'s stateRoot."""
    state_root = bytes(w3.eth.get_block(block)["stateRoot"])
    address = bytes.fromhex(proof["address"][2:])
    out = {"block": block, "address": proof["address"].lower()}
    try:
        account = verify_proof(state_root, keccak(address), proof["accountProof"])
        if account is None:
            out["account"] = None
        else:
            nonce, balance, storage_root, code_hash = rlp.decode(account)
            out["account"] = {
                "nonce": int.from_bytes(nonce, "big"),
                "balance": str(int.from_bytes(balance, "big")),
                "storageHash": "0x" + storage_root.hex(),
                "codeHash": "0x" + code_hash.hex(),
            }
        out["returned"] = {
            "nonce": proof["nonce"],
            "balance": str(proof["balance"]),
            "storageHash": "0x" + bytes(proof["storageHash"]).hex(),
            "codeHash": "0x" + bytes(proof["codeHash"]).hex(),
        }
        storage_root = bytes(proof["storageHash"])
        out["storage"] = []
        for s in proof["storageProof"]:
            key = int.from_bytes(bytes(s["key"]), "big") if not isinstance(s["key"], int) else s["key"]
            slot = key.to_bytes(32, "big")
            v = verify_proof(storage_root, keccak(slot), s["proof"])
            proven = 0 if v is None else int.from_bytes(rlp.decode(v), "big")
            on_chain = int.from_bytes(
                bytes(w3.eth.get_storage_at(proof["address"], key, block)), "big"
            )
            out["storage"].append(
                {
                    "key": hex(key),
                    "returned": s["value"],
                    "proven": str(proven),
                    "getStorageAt": str(on_chain),
                }
            )
        out["verified"] = True
    except ValueError as e:
        out["verified"] = False
        out["reason"] = str(e)
    return out


def log_json(log):
    return {
        "address": log["address"].lower(),
        "blockNumber": log["blockNumber"],
        "logIndex": log["logIndex"],
        "transactionHash": "0x" + bytes(log["transactionHash"]).hex(),
        "topics": ["0x" + bytes(t).hex() for t in log["topics"]],
        "data": "0x" + bytes(log["data"]).hex(),
    }


def event_json(ev):
    return {
        "event": ev["event"],
        "blockNumber": ev["blockNumber"],
        "from": ev["args"]["from"].lower(),
        "to": ev["args"]["to"].lower(),
        "value": str(ev["args"]["value"]),
    }


def to_jsonable(o):
    if isinstance(o, (bytes, bytearray)):
        return "0x" + bytes(o).hex()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def emit(obj):
    print(json.dumps(obj, default=to_jsonable), flush=True)


def main():
    cfg = json.loads(sys.argv[1])
    provider = RecordingProvider(cfg["url"], request_kwargs={"timeout": 30})
    w3 = Web3(provider)
    a0, a1 = (to_checksum_address(a) for a in cfg["accounts"][:2])
    token_addr = to_checksum_address(cfg["token"])
    counter = to_checksum_address(cfg["counter"])
    token = w3.eth.contract(address=token_addr, abi=TOKEN_ABI)
    transfer_topic = Web3.keccak(text="Transfer(address,address,uint256)")

    out = {"stage": "static", "chainId": w3.eth.chain_id, "head": w3.eth.block_number}

    # get_logs: every log of the chain, then Token's Transfer logs by topic, then by recipient.
    out["logsAll"] = [log_json(l) for l in w3.eth.get_logs({"fromBlock": 0, "toBlock": "latest"})]
    out["logsTransfer"] = [
        log_json(l)
        for l in w3.eth.get_logs(
            {"fromBlock": 0, "toBlock": "latest", "address": token_addr, "topics": [transfer_topic]}
        )
    ]
    to_a1 = "0x" + "00" * 12 + a1[2:].lower()
    out["logsToA1"] = [
        log_json(l)
        for l in w3.eth.get_logs(
            {"fromBlock": "0x0", "toBlock": "latest", "topics": [transfer_topic, None, to_a1]}
        )
    ]
    out["eventsTransfer"] = [
        event_json(e) for e in token.events.Transfer.get_logs(from_block=0, to_block="latest")
    ]

    # estimate_gas: a call to the hand-assembled Counter, and a Token transfer.
    out["estimateCounter"] = w3.eth.estimate_gas({"from": a0, "to": counter})
    out["estimateTransfer"] = w3.eth.estimate_gas(
        {"from": a0, "to": token_addr, "data": token.encode_abi("transfer", [a1, 1])}
    )

    # fee_history: the last 10 blocks with two reward percentiles.
    fh = w3.eth.fee_history(10, "latest", [25, 75])
    out["feeHistory"] = {
        "oldestBlock": fh["oldestBlock"],
        "baseFeePerGas": [str(x) for x in fh["baseFeePerGas"]],
        "gasUsedRatio": list(fh["gasUsedRatio"]),
        "reward": [[str(x) for x in r] for r in fh["reward"]],
    }
    fh_old = w3.eth.fee_history(4, 3, [50])
    out["feeHistoryAt3"] = {
        "oldestBlock": fh_old["oldestBlock"],
        "baseFeePerGas": [str(x) for x in fh_old["baseFeePerGas"]],
        "gasUsedRatio": list(fh_old["gasUsedRatio"]),
        "reward": [[str(x) for x in r] for r in fh_old["reward"]],
    }

    # get_proof: Counter's slot 0 at block 13 and at the head, Token's balance slots of
    # accounts 0 and 1 (mapping at slot 0), and an account that does not exist.
    def balance_slot(a):
        return int.from_bytes(keccak(bytes(12) + bytes.fromhex(a[2:]) + bytes(32)), "big")

    proofs = [
        check_proof(w3, w3.eth.get_proof(counter, [0], 13), 13),
        check_proof(w3, w3.eth.get_proof(counter, [0, 1], "latest"), out["head"]),
        check_proof(
            w3,
            w3.eth.get_proof(token_addr, [balance_slot(a0), balance_slot(a1), 1], "latest"),
            out["head"],
        ),
        check_proof(
            w3,
            w3.eth.get_proof("0x000000000000000000000000000000000000dEaD", [], "latest"),
            out["head"],
        ),
    ]
    out["proofs"] = proofs
    out["calls"] = provider.calls
    provider.calls = []
    emit(out)

    # Filters: a Transfer event filter and a new-block filter, polled once before new blocks.
    event_filter = token.events.Transfer.create_filter(from_block="latest")
    block_filter = w3.eth.filter("latest")
    before = {
        "events": [event_json(e) for e in event_filter.get_new_entries()],
        "blocks": ["0x" + bytes(h).hex() for h in block_filter.get_new_entries()],
    }
    emit({"stage": "ready", "before": before, "filterId": event_filter.filter_id})
    if sys.stdin.readline().strip() != "go":
        sys.exit("expected 'go' on stdin")
    after = {
        "events": [event_json(e) for e in event_filter.get_new_entries()],
        "blocks": ["0x" + bytes(h).hex() for h in block_filter.get_new_entries()],
    }
    again = {
        "events": [event_json(e) for e in event_filter.get_new_entries()],
        "blocks": ["0x" + bytes(h).hex() for h in block_filter.get_new_entries()],
    }
    uninstalled = w3.eth.uninstall_filter(event_filter.filter_id)
    emit(
        {
            "stage": "filters",
            "after": after,
            "again": again,
            "uninstalled": uninstalled,
            "calls": provider.calls,
        }
    )


if __name__ == "__main__":
    main()
