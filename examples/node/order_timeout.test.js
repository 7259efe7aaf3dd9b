// The Node order-timeout example end to end against a real lapsed (LAPSED,
// from CMake): the 4th unpaid order is refused, the paid one is never
// cancelled, the others are cancelled exactly once by the pool of three
// workers. The TTL is 30 minutes; the test makes it pass at once after the
// payment, by expiring the unpaid orders now.
'use strict';

const assert = require('node:assert/strict');
const {it} = require('node:test');
const {Expiration, status} = require('../../client/node/src/index');
const {LapsedProcess, withPatience} = require('../../testing/node/lapsed_process');
const {run} = require('./order_timeout');

it('a pool of three workers cancels each unpaid order once and never the paid one', async () => {
  const lapsed = await LapsedProcess.start(process.env.LAPSED);
  const {refused, cancelled, group} = await withPatience(run(lapsed.address, {
    ttlMs: 30 * 60e3,
    afterPayment: async (client, collection) => {
      const unpaid = (await client.listMembers(collection)).members.map((m) => m.key);
      await client.expireMembers(collection, unpaid, Expiration.at(new Date(Date.now() - 1000)));
    },
  }), 'order-timeout flow');
  assert.equal(refused, status.FAILED_PRECONDITION);
  assert.deepEqual(cancelled.map(([order]) => order).sort(), ['order-1', 'order-3']);
  // Exactly once: two deliveries in all, both acknowledged, nothing pending.
  assert.equal(group.deliveredTotal, 2n);
  assert.equal(group.ackedTotal, 2n);
  assert.equal(group.pending, 0n);
  assert.equal(await lapsed.stop(), 0);
});
