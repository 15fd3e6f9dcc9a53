// viem over WebSocket against `loupe follow --ws` (run by tests/follow.rs).
//
// Usage: node viem_ws.mjs <ws-url> <count>. Subscribes to newHeads through viem's WebSocket
// transport, prints {"ready":true} once subscribed, then, after <count> heads, prints them as
// [{"number": "0x..", "hash": "0x.."}, ...] and exits. It only reports; the test checks.
import { createPublicClient, webSocket } from "viem";

const [url, count] = [process.argv[2], Number(process.argv[3])];
const client = createPublicClient({ transport: webSocket(url, { retryCount: 0 }) });
const heads = [];
const timer = setTimeout(() => {
  console.log(JSON.stringify({ error: "timeout", heads }));
  process.exit(2);
}, 60_000);
const { unsubscribe } = await client.transport.subscribe({
  params: ["newHeads"],
  onData: (data) => {
    const h = data.params?.result ?? data.result;
    heads.push({ number: h.number, hash: h.hash, parentHash: h.parentHash });
    if (heads.length === count) {
      clearTimeout(timer);
      console.log(JSON.stringify(heads));
      unsubscribe().finally(() => process.exit(0));
    }
  },
  onError: (e) => {
    console.log(JSON.stringify({ error: String(e) }));
    process.exit(3);
  },
});
console.log(JSON.stringify({ ready: true }));
