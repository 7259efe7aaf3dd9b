// The Node client's consumer groups: the admin calls and Worker against a real
// lapsed (LAPSED, from CMake), and Worker's polling against a fake server.
//
//   LAPSED=build/dev/server/lapsed NODE_PATH=build/node-client/node_modules \
//     node --test client/node/test/groups.test.js
'use strict';

const assert = require('node:assert/strict');
const {describe, it} = require('node:test');
const grpc = require('@grpc/grpc-js');
const {Client, Expiration, LapseError, status} = require('../src/index');
const {loadService} = require('../src/client');
const {LapsedProcess, withPatience} = require('../../../testing/node/lapsed_process');

// Expires `keys` of `collection` now: one event each, in this order.
async function expireNow(client, collection, keys) {
  await client.putMembers(collection, keys.map((key) => ({key})));
  await client.expireMembers(collection, keys, Expiration.at(new Date(Date.now() - 1000)));
}

// A promise and its resolve function.
function signalled() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return {promise, resolve};
}

describe('consumer groups', () => {
  it('creates, gets, lists, resets and deletes a group', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED);
    const client = new Client(lapsed.address);
    const created = await client.createConsumerGroup('g', {collectionPrefix: 'orders:',
      visibilityTimeoutMs: 5000, maxDeliveries: 3});
    assert.equal(created.name, 'g');
    assert.equal(created.collectionPrefix, 'orders:');
    assert.equal(created.visibilityTimeoutMs, 5000);
    assert.equal(created.maxDeliveries, 3);
    await assert.rejects(client.createConsumerGroup('g', {collectionPrefix: 'orders:'}),
        (err) => err instanceof LapseError && err.code === status.ALREADY_EXISTS);
    await assert.rejects(client.createConsumerGroup('h', {collections: ['a'],
      collectionPrefix: 'b'}), (err) => err.code === status.INVALID_ARGUMENT);

    await expireNow(client, 'orders:1', ['a']);
    const {deliveries} = await client.poll('g', 'c1', {maxEvents: 5});
    assert.deepEqual(deliveries.map((d) => [d.event.key, d.deliveryCount]), [['a', 1]]);
    const got = await client.getConsumerGroup('g', {maxLeases: 10});
    assert.equal(got.pending, 1n);
    assert.deepEqual(got.leases.map((l) => [l.sequence, l.consumer]),
        [[deliveries[0].event.sequence, 'c1']]);
    const [extended] = await client.extendLeases('g', 'c1', deliveries, 60000);
    assert.equal(extended.code, status.OK);
    const [released] = await client.nack('g', 'c1', deliveries);
    assert.equal(released.code, status.OK);
    const again = await client.poll('g', 'c2');
    assert.equal(again.deliveries[0].deliveryCount, 2);
    const [acked] = await client.ack('g', 'c2', again.deliveries);
    assert.equal(acked.code, status.OK);
    const [twice] = await client.ack('g', 'c2', again.deliveries);
    assert.equal(twice.code, status.FAILED_PRECONDITION);

    const {groups} = await client.listConsumerGroups();
    assert.deepEqual(groups.map((g) => [g.name, g.ackedTotal]), [['g', 1n]]);
    const reset = await client.resetConsumerGroup('g', {start: 'OLDEST'});
    assert.ok(reset.position < deliveries[0].event.sequence);
    const deleted = await client.deleteConsumerGroup('g');
    assert.equal(deleted.name, 'g');
    await assert.rejects(client.getConsumerGroup('g'), (err) => err.code === status.NOT_FOUND);
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('a worker acks what its handler handled and redelivers what it threw on', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED);
    const client = new Client(lapsed.address);
    await client.createConsumerGroup('g', {collectionPrefix: 'orders:'});
    await expireNow(client, 'orders:1', ['a', 'b']);
    const handled = [];
    const errors = [];
    const done = signalled();
    const worker = client.worker('g', 'w1', async ({event, deliveryCount}) => {
      handled.push([event.key, deliveryCount]);
      if (event.key === 'a' && deliveryCount === 1) throw new Error('payment service down');
      if (handled.length === 3) done.resolve();
    }, {maxEvents: 1, waitMs: 1000, onError: (delivery, err) => errors.push(err.message)});
    const running = worker.run();
    await withPatience(done.promise, 'three deliveries');
    worker.stop();
    await withPatience(running, 'end of run()');
    assert.deepEqual(handled, [['a', 1], ['a', 2], ['b', 1]]);
    assert.deepEqual(errors, ['payment service down']);
    const group = await client.getConsumerGroup('g');
    assert.equal(group.ackedTotal, 2n);
    assert.equal(group.pending, 0n);
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('a worker ends with OUT_OF_RANGE naming the events its group lost', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED, ['--event_retention_events=2']);
    const client = new Client(lapsed.address);
    await client.createConsumerGroup('g', {collectionPrefix: 'orders:'});
    await expireNow(client, 'orders:1', ['a', 'b', 'c', 'd']);
    const worker = client.worker('g', 'w1', async () => {}, {waitMs: 1000});
    await assert.rejects(withPatience(worker.run(), 'end of run()'),
        (err) => err instanceof LapseError && err.code === status.OUT_OF_RANGE &&
            err.lostLastSequence === err.lostFirstSequence + 1n &&
            err.message.includes(`lost events ${err.lostFirstSequence}..${err.lostLastSequence}`));
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('a worker polls again under its name after UNAVAILABLE and pauses after an empty ' +
      'answer that did not wait', async () => {
    const polls = [];
    const thirdPoll = signalled();
    const server = new grpc.Server();
    server.addService(loadService().service, {
      Poll: (call, callback) => {
        polls.push({consumer: call.request.consumer, wait: call.request.wait.seconds,
          at: Date.now()});
        if (polls.length === 1) {
          callback({code: status.UNAVAILABLE, details: 'restarting'});
          return;
        }
        callback(null, {deliveries: []});
        if (polls.length === 3) thirdPoll.resolve();
      },
    });
    const port = await new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0',
        grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    const client = new Client(`127.0.0.1:${port}`, {
      retryBackoff: {initialMs: 1, maxMs: 1, multiplier: 1},
      idlePollBackoff: {initialMs: 400, maxMs: 400, multiplier: 1},
    });
    const worker = client.worker('g', 'w1', async () => assert.fail('no event was sent'),
        {waitMs: 5000});
    const running = worker.run();
    await withPatience(thirdPoll.promise, 'third poll');
    worker.stop();
    await withPatience(running, 'end of run()');
    assert.deepEqual(polls.map(({consumer, wait}) => [consumer, wait]),
        [['w1', '5'], ['w1', '5'], ['w1', '5']]);
    // The pause after the empty answer is at least half the idle backoff.
    assert.ok(polls[2].at - polls[1].at >= 200, `polled again after ${polls[2].at - polls[1].at} ms`);
    client.close();
    server.forceShutdown();
  });
});
