// ethers v6 against a loupe dev chain (run by tests/clients.rs).
//
// Usage: node ethers_check.mjs '<json>' where the JSON holds the node URL and the sample-history
// addresses (README's table). Prints one JSON object: what ethers returned for getFeeData,
// contract.queryFilter and estimateGas, the latest block's header fields those depend on, and
// every JSON-RPC method ethers sent (with any error response). It only reports;
// tests/clients.rs decides what is right.
import { ethers } from "ethers";

const cfg = JSON.parse(process.argv[2]);
const [a0, a1] = cfg.accounts.map((a) => ethers.getAddress(a));

const provider = new ethers.JsonRpcProvider(cfg.url, undefined, {
  staticNetwork: ethers.Network.from(1337),
  batchMaxCount: 1,
  pollingInterval: 100,
});
// Every request and its outcome, from ethers' debug events.
const calls = [];
provider.on("debug", (e) => {
  if (e.action === "sendRpcPayload") {
    for (const p of [].concat(e.payload)) calls.push({ id: p.id, method: p.method, params: p.params });
  } else if (e.action === "receiveRpcResult") {
    for (const r of [].concat(e.result)) {
      const c = calls.find((c) => c.id === r.id && !("ok" in c));
      if (c) {
        c.ok = !r.error;
        if (r.error) c.error = r.error;
        else delete c.params;
      }
    }
  } else if (e.action === "receiveRpcError") {
    calls.push({ error: String(e.error) });
  }
});

const abi = [
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "function transfer(address to, uint256 value) returns (bool)",
  "function balanceOf(address) view returns (uint256)",
];
const token = new ethers.Contract(cfg.token, abi, provider);

const big = (v) => (v == null ? null : v.toString());
const ev = (e) => ({
  event: e.fragment?.name ?? null,
  blockNumber: e.blockNumber,
  transactionHash: e.transactionHash,
  logIndex: e.index,
  from: e.args?.from?.toLowerCase() ?? null,
  to: e.args?.to?.toLowerCase() ?? null,
  value: big(e.args?.value),
});

const out = {};
try {
  // getFeeData, and the latest block it reads the base fee from.
  const fee = await provider.getFeeData();
  out.feeData = {
    gasPrice: big(fee.gasPrice),
    maxFeePerGas: big(fee.maxFeePerGas),
    maxPriorityFeePerGas: big(fee.maxPriorityFeePerGas),
  };
  const latest = await provider.getBlock("latest");
  out.latest = { number: latest.number, baseFeePerGas: big(latest.baseFeePerGas) };

  // contract.queryFilter: every Transfer, those to account 1, and a block range without any.
  out.transfers = (await token.queryFilter(token.filters.Transfer(), 0, "latest")).map(ev);
  out.transfersToA1 = (await token.queryFilter(token.filters.Transfer(null, a1))).map(ev);
  out.transfersFrom0 = (await token.queryFilter(token.filters.Transfer(ethers.ZeroAddress), 0)).map(ev);
  out.transfers6to20 = (await token.queryFilter("Transfer", 6, 20)).map(ev);

  // estimateGas: the hand-assembled Counter, and Token.transfer(account 1, 1) from account 0.
  out.estimateCounter = big(await provider.estimateGas({ from: a0, to: cfg.counter }));
  const transferGas = await token.transfer.estimateGas(a1, 1n, { from: a0 });
  out.estimateTransfer = big(transferGas);
  // The estimate must be enough: the same call with exactly that gas succeeds...
  out.transferWithEstimate = await token.transfer
    .staticCall(a1, 1n, { from: a0, gasLimit: transferGas })
    .then((r) => ({ ok: true, result: r }))
    .catch((e) => ({ ok: false, error: e.shortMessage ?? String(e) }));
  // ...and, as geth's search stops within 1.5% of the least gas that works, 98.5% of it fails.
  const under = (transferGas * 985n) / 1000n;
  out.transferUnder = { gas: big(under) };
  Object.assign(
    out.transferUnder,
    await token.transfer
      .staticCall(a1, 1n, { from: a0, gasLimit: under })
      .then((r) => ({ ok: true, result: r }))
      .catch((e) => ({ ok: false, error: e.shortMessage ?? String(e) })),
  );
  // A transfer of more than account 2 holds reverts: estimateGas must say so.
  out.estimateRevert = await token.transfer
    .estimateGas(a1, 1n, { from: cfg.accounts[2] })
    .then((g) => ({ ok: true, gas: big(g) }))
    .catch((e) => ({ ok: false, code: e.code ?? null, reason: e.reason ?? null }));
} catch (e) {
  out.exception = String(e?.stack ?? e);
}
out.calls = calls.map(({ id, ...c }) => c);
provider.destroy();
console.log(JSON.stringify(out));
