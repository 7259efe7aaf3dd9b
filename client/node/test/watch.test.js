// The Node client's watch against a real lapsed (LAPSED: its path, from
// CMake): it survives a durable lapsed's restart with no gap and no
// duplicate, throws OUT_OF_RANGE instead of skipping, throws on a bad filter,
// and ends on break or cancel().
//
//   LAPSED=build/dev/server/lapsed NODE_PATH=build/node-client/node_modules \
//     node --test client/node/test/watch.test.js
'use strict';

const assert = require('node:assert/strict');
const {describe, it} = require('node:test');
const {Client, Expiration, LapseError, status} = require('../src/index');
const {LapsedProcess, tempDir, withPatience} = require('../../../testing/node/lapsed_process');

// Expires `keys` of `collection` now: one event each, in this order.
async function expireNow(client, collection, keys) {
  await client.putMembers(collection, keys.map((key) => ({key, value: `value of ${key}`})));
  for (const key of keys) {
    const [result] = await client.expireMembers(collection, [key],
        Expiration.at(new Date(Date.now() - 1000)));
    assert.equal(result.outcome, 'EXPIRED');
  }
}

// The next event of `iterator`, within patience.
async function nextEvent(iterator) {
  const {value, done} = await withPatience(iterator.next(), 'expiry event');
  assert.equal(done, false);
  return value;
}

// A watch from OLDEST of a durable lapsed that `end`s ('stop': SIGTERM, which
// names the last delivered sequence; 'kill': SIGKILL, which names nothing)
// and restarts on the same port and store.
async function resumesAcrossARestart(end) {
  const flags = [`--data-dir=${tempDir()}`];
  let lapsed = await LapsedProcess.start(process.env.LAPSED, flags);
  const port = lapsed.port;
  const watcher = new Client(lapsed.address,
      {watchBackoff: {initialMs: 10, maxMs: 200, multiplier: 2},
        reconnectBackoffInitialMs: 10, reconnectBackoffMaxMs: 200});
  const reconnects = [];
  const watch = watcher.watch({collections: ['orders'], start: 'OLDEST', includeValues: true,
    onReconnecting: (err) => reconnects.push(err.code)});
  const events = watch[Symbol.asyncIterator]();

  let writer = new Client(lapsed.address);
  await expireNow(writer, 'orders', ['k1']);
  await expireNow(writer, 'other', ['ignored']);
  const first = await nextEvent(events);
  assert.equal(first.key, 'k1');
  assert.equal(first.value.toString(), 'value of k1');
  writer.close();
  if (end === 'stop') {
    assert.equal(await lapsed.stop(), 0);
  } else {
    await lapsed.kill();
  }

  // A new lapsed on the same port and store; events expire there before the
  // watch is back: it must resume after k1 and get them all, once.
  lapsed = await LapsedProcess.start(process.env.LAPSED, flags, port);
  writer = new Client(lapsed.address);
  await expireNow(writer, 'orders', ['k2', 'k3']);
  const second = await nextEvent(events);
  const third = await nextEvent(events);
  await expireNow(writer, 'orders', ['k4']);
  const fourth = await nextEvent(events);
  assert.deepEqual([second.key, third.key, fourth.key], ['k2', 'k3', 'k4']);
  assert.ok(first.sequence < second.sequence && second.sequence < third.sequence);
  assert.ok(reconnects.length >= 1);
  assert.ok(reconnects.every((code) => code === status.UNAVAILABLE));
  assert.equal(watch.position, fourth.sequence);

  await events.return();
  writer.close();
  watcher.close();
  assert.equal(await lapsed.stop(), 0);
}

describe('watch', () => {
  for (const end of ['stop', 'kill']) {
    it(`resumes across a durable lapsed restart (${end}) with no gap and no duplicate`,
        () => resumesAcrossARestart(end));
  }

  it('throws OUT_OF_RANGE when the events to resume from are gone', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED, ['--event_retention_events=2']);
    const client = new Client(lapsed.address);
    await expireNow(client, 'c', ['a', 'b', 'c', 'd']);
    const oldest = client.watch({start: 'OLDEST'})[Symbol.asyncIterator]();
    const retained = await nextEvent(oldest);
    assert.equal(retained.key, 'c');
    await oldest.return();

    const resumed = client.watch({start: 'AFTER_SEQUENCE', afterSequence: retained.sequence - 3n});
    await assert.rejects(async () => {
      for await (const event of resumed) assert.fail(`got ${event.key} instead of an error`);
    }, (err) => err instanceof LapseError && err.code === status.OUT_OF_RANGE &&
        err.message.includes(String(retained.sequence)));
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('throws OUT_OF_RANGE when it resumes on a memory-only lapsed that restarted', async () => {
    let lapsed = await LapsedProcess.start(process.env.LAPSED);
    const port = lapsed.port;
    // The watch reconnects only once the new store has more events than the
    // old one had: resuming by sequence would then silently skip to them.
    const restarted = {};
    restarted.promise = new Promise((resolve) => (restarted.resolve = resolve));
    const watcher = new Client(lapsed.address, {watchBackoff: {initialMs: 10, maxMs: 10,
      multiplier: 1}, reconnectBackoffInitialMs: 10, reconnectBackoffMaxMs: 200});
    const watch = watcher.watch({start: 'OLDEST', onReconnecting: () => restarted.promise});
    const events = watch[Symbol.asyncIterator]();
    let writer = new Client(lapsed.address);
    await expireNow(writer, 'orders', ['k1']);
    assert.equal((await nextEvent(events)).key, 'k1');
    writer.close();
    await lapsed.kill();

    lapsed = await LapsedProcess.start(process.env.LAPSED, [], port);
    writer = new Client(lapsed.address);
    await expireNow(writer, 'orders', ['n1', 'n2', 'n3']);
    restarted.resolve();
    await assert.rejects(withPatience(events.next(), 'end of the watch'),
        (err) => err instanceof LapseError && err.code === status.OUT_OF_RANGE &&
            /resume_token: belongs to store/.test(err.message));
    writer.close();
    watcher.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('throws INVALID_ARGUMENT for a bad filter instead of retrying', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED);
    const client = new Client(lapsed.address);
    const watch = client.watch({collections: ['a'], collectionPrefix: 'b'});
    await assert.rejects(async () => {
      for await (const event of watch) assert.fail(`got ${event.key}`);
    }, (err) => err instanceof LapseError && err.code === status.INVALID_ARGUMENT);
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('ends the iterations of its watches when the client closes', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED);
    const client = new Client(lapsed.address);
    let onConnected;
    const isConnected = new Promise((resolve) => (onConnected = resolve));
    const iteration = (async () => {
      for await (const event of client.watch({onConnected})) assert.fail(`got ${event.key}`);
    })();
    await withPatience(isConnected, 'connected watch');
    client.close();
    await withPatience(iteration, 'end of the iteration');
    assert.equal(await lapsed.stop(), 0);
  });

  it('refuses AFTER_SEQUENCE without a BigInt afterSequence before calling', () => {
    const client = new Client('127.0.0.1:1');
    assert.throws(() => client.watch({start: 'AFTER_SEQUENCE'}),
        (err) => err instanceof LapseError && err.code === status.INVALID_ARGUMENT &&
            /afterSequence/.test(err.message));
    client.close();
  });

  it('ends the iteration on cancel()', async () => {
    const lapsed = await LapsedProcess.start(process.env.LAPSED);
    const client = new Client(lapsed.address);
    let onConnected;
    const isConnected = new Promise((resolve) => (onConnected = resolve));
    const watch = client.watch({onConnected});
    const iteration = (async () => {
      const seen = [];
      for await (const event of watch) seen.push(event);
      return seen;
    })();
    await withPatience(isConnected, 'connected watch');
    watch.cancel();
    assert.deepEqual(await withPatience(iteration, 'end of the iteration'), []);
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });
});
