// The order-timeout flow with the Node client: a user places orders, at most
// 3 unpaid at once (maxMembers), each cancelled if unpaid when its TTL ends;
// paying one removes it (no expiry event); a pool of three workers of the
// consumer group "cancel-unpaid" cancels the others as their expiry events
// arrive. The group hands each event to one worker at a time and takes it
// back (for another worker) only if that worker's handler throws, so each
// timed-out order is cancelled exactly once however many workers run.
//
//   NODE_PATH=build/node-client/node_modules \
//     node examples/node/order_timeout.js 127.0.0.1:50051
//
// run() is also what examples/node/order_timeout.test.js runs against a real
// lapsed. `afterPayment` is where the test makes the TTL pass at once.
'use strict';

const {Client, Expiration, LapseError, status} = require('../../client/node/src/index');

const group = 'cancel-unpaid';
const workers = 3;

// The group of the cancelling workers: every event of "unpaid:" collections
// from now on, with the order's details.
async function createGroup(client) {
  try {
    await client.createConsumerGroup(group, {collectionPrefix: 'unpaid:', includeValues: true});
  } catch (err) {
    if (!(err instanceof LapseError) || err.code !== status.ALREADY_EXISTS) throw err;
  }
}

// Runs `workers` workers of the group until `count` orders were cancelled (a
// real pool runs until it is stopped); resolves to [order, worker] per
// cancellation.
async function cancelTimedOutOrders(client, count) {
  const cancelled = [];
  let enough;
  const isEnough = new Promise((resolve) => (enough = resolve));
  const pool = [];
  for (let number = 1; number <= workers; ++number) {
    const name = `worker-${number}`;
    pool.push(client.worker(group, name, async ({event}) => {
      const user = event.collection.slice('unpaid:'.length);
      console.log(`${name} cancelled ${event.key} of ${user}: ${event.value}`);
      cancelled.push([event.key, name]);
      if (cancelled.length >= count) enough();
    }, {maxEvents: 1, waitMs: 5000}));
  }
  const running = Promise.all(pool.map((worker) => worker.run()));
  await Promise.race([isEnough, running]);
  for (const worker of pool) worker.stop();
  await running;
  return cancelled;
}

// Resolves to {refused: the status code of the 4th order, cancelled: [order,
// worker] per cancellation, group: the group after the pool stopped}.
async function run(address, {user = 'user-42', ttlMs = 2000, afterPayment = async () => {}} = {}) {
  const client = new Client(address);
  try {
    await createGroup(client);
    const collection = `unpaid:${user}`;
    for (const order of ['order-1', 'order-2', 'order-3']) {
      await client.putMembers(collection,
          [{key: order, value: `{"total": 12}`, expiration: Expiration.ttl(ttlMs)}],
          {maxMembers: 3});
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
    const cancelled = await cancelTimedOutOrders(client, 2);
    return {refused, cancelled, group: await client.getConsumerGroup(group)};
  } finally {
    client.close();
  }
}

if (require.main === module) {
  run(process.argv[2] ?? '127.0.0.1:50051').then(({cancelled}) => {
    console.log(`cancelled: ${cancelled.map(([order]) => order).join(', ')}`);
  }, (err) => {
    console.error(err);
    process.exitCode = 1;
  });
}

module.exports = {run};
