// viem against a loupe dev chain (run by tests/clients.rs).
//
// Usage: node viem_check.mjs '<json>' [simulate]. The JSON holds the node URL and the
// sample-history addresses (README's table). Without `simulate` it prints what viem returned
// for getLogs and estimateFeesPerGas; with it, what simulateCalls (eth_simulateV1) returned.
// Every JSON-RPC method viem sent is listed with any error response. It only reports;
// tests/clients.rs decides what is right.
import { createPublicClient, defineChain, http, parseAbi, parseAbiItem } from "viem";

const cfg = JSON.parse(process.argv[2]);
const mode = process.argv[3] ?? "reads";
const [a0, a1] = cfg.accounts;

const calls = [];
async function recordingFetch(input, init) {
  const req = JSON.parse(init.body);
  const res = await fetch(input, init);
  const body = await res.clone().json().catch(() => null);
  for (const r of [].concat(req)) {
    const reply = [].concat(body ?? []).find((b) => b?.id === r.id);
    const c = { method: r.method };
    if (!reply || reply.error) {
      c.params = r.params;
      c.error = reply?.error ?? `HTTP ${res.status}`;
    }
    calls.push(c);
  }
  return res;
}

const chain = defineChain({
  id: 1337,
  name: "loupe dev",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [cfg.url] } },
});
const client = createPublicClient({
  chain,
  transport: http(cfg.url, { fetchFn: recordingFetch, retryCount: 0, timeout: 30_000 }),
});

const transferEvent = parseAbiItem(
  "event Transfer(address indexed from, address indexed to, uint256 value)",
);
const tokenAbi = parseAbi([
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "function transfer(address to, uint256 value) returns (bool)",
]);
const proberAbi = parseAbi(["function fail() pure"]);

const big = (v) => (typeof v === "bigint" ? v.toString() : v);
const jsonable = (x) => JSON.parse(JSON.stringify(x, (_, v) => big(v)));
const log = (l) => ({
  eventName: l.eventName ?? null,
  address: l.address.toLowerCase(),
  blockNumber: big(l.blockNumber),
  logIndex: l.logIndex,
  transactionHash: l.transactionHash,
  from: l.args?.from?.toLowerCase() ?? null,
  to: l.args?.to?.toLowerCase() ?? null,
  value: big(l.args?.value),
});

const out = { mode };
try {
  if (mode === "simulate") {
    // Counter twice (the second call sees the first's write), a Token transfer that logs, and
    // Prober.fail(), which reverts.
    const sim = await client.simulateCalls({
      account: a0,
      calls: [
        { to: cfg.counter, data: "0x" },
        { to: cfg.counter, data: "0x" },
        { to: cfg.token, abi: tokenAbi, functionName: "transfer", args: [a1, 5n] },
        { to: cfg.prober, abi: proberAbi, functionName: "fail" },
      ],
    });
    out.results = sim.results.map((r) =>
      jsonable({
        status: r.status,
        data: r.data,
        result: r.result,
        gasUsed: r.gasUsed,
        error: r.error ? (r.error.shortMessage ?? String(r.error)) : undefined,
        logs: r.logs?.map((l) => ({ address: l.address.toLowerCase(), topics: l.topics, data: l.data })),
      }),
    );
  } else {
    out.blockNumber = big(await client.getBlockNumber());
    const latest = await client.getBlock();
    out.latest = { number: big(latest.number), baseFeePerGas: big(latest.baseFeePerGas) };

    // getLogs: decoded Transfer events, those to account 1, and raw logs of the whole chain.
    out.transfers = (
      await client.getLogs({ address: cfg.token, event: transferEvent, fromBlock: 0n, toBlock: "latest" })
    ).map(log);
    out.transfersToA1 = (
      await client.getLogs({ event: transferEvent, args: { to: a1 }, fromBlock: 0n })
    ).map(log);
    out.allLogs = (await client.getLogs({ fromBlock: 0n, toBlock: "latest" })).map(log);
    out.logsAt5 = (await client.getLogs({ address: cfg.token, blockHash: cfg.block5Hash })).map(log);

    // estimateFeesPerGas: EIP-1559 (default) and legacy.
    out.fees = jsonable(await client.estimateFeesPerGas());
    out.legacyFees = jsonable(await client.estimateFeesPerGas({ type: "legacy" }));
    out.maxPriorityFeePerGas = big(await client.estimateMaxPriorityFeePerGas());
  }
} catch (e) {
  out.exception = e?.shortMessage ? `${e.shortMessage}\n${e.details ?? ""}` : String(e?.stack ?? e);
}
out.calls = calls;
console.log(JSON.stringify(out));
