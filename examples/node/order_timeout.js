// The order-timeout flow with the Node client: a user places orders, at most
// 3 unpaid at once (maxMembers), each cancelled if unpaid when its TTL ends;
// paying one removes it; a watcher cancels the others as their expiry
// events arrive, each once.
//
//   NODE_PATH=build/node-client/node_modules \
//     node examples/node/order_timeout.js 127.0.0.1:50051
//
// run() is also what examples/node/order_timeout.test.js runs against a real
// lapsed. `afterPayment` is where the test makes the TTL pass at once.
'use strict';

const {Client, Expiration, LapseError, status} = require('../../client/node/src/index');

// Resolves to {refused: the status code of the 4th order, cancelled: the
// orders the watcher cancelled, in order}.
async function run(address, {user = 'user-42', ttlMs = 2000, afterPayment = async () => {}} = {}) {
  const client = new Client(address);
  const collection = `unpaid:${user}`;
  let connected;
  const isConnected = new Promise((resolve) => (connected = resolve));
  const watch = client.watch({collectionPrefix: 'unpaid:', includeValues: true,
    onConnected: connected});
  const cancelled = [];
  const watcher = (async () => {
    for await (const event of watch) {
      console.log(`cancelling ${event.key} of ${event.collection}: ${event.value}`);
      cancelled.push(event.key);
      if (cancelled.length === 2) return;
    }
  })();
  await isConnected;

  for (const order of ['order-1', 'order-2', 'order-3']) {
    await client.putMembers(collection,
        [{key: order, value: `{"total": 12}`, expiration: Expiration.ttl(ttlMs)}], {maxMembers: 3});
  }
  let refused = status.OK;
  try {
    await client.putMembers(collection, [{key: 'order-4', expiration: Expiration.ttl(ttlMs)}],
        {maxMembers: 3});
  } catch (err) {
    if (!(err instanceof LapseError)) throw err;
    refused = err.code;
  }
  const [paid] = await client.removeMembers(collection, ['order-2']);
  if (!paid.existed) throw new Error('order-2 expired before it was paid: use a longer TTL');
  await afterPayment(client, collection);
  await watcher;
  client.close();
  return {refused, cancelled};
}

if (require.main === module) {
  run(process.argv[2] ?? '127.0.0.1:50051').then(({cancelled}) => {
    console.log(`cancelled: ${cancelled.join(', ')}`);
  }, (err) => {
    console.error(err);
    process.exitCode = 1;
  });
}

module.exports = {run};
