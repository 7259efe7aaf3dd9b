// The Node client against a real lapsed (LAPSED: its path, from CMake): every
// unary RPC, errors as LapseError with the status code, and against a fake
// server: retries of idempotent calls only, per-call deadlines.
//
//   LAPSED=build/dev/server/lapsed NODE_PATH=build/node-client/node_modules \
//     node --test client/node/test/client.test.js
'use strict';

const assert = require('node:assert/strict');
const {after, before, describe, it} = require('node:test');
const grpc = require('@grpc/grpc-js');
const {Client, Expiration, LapseError, status} = require('../src/index');
const {loadService} = require('../src/client');
const {LapsedProcess} = require('../../../testing/node/lapsed_process');

describe('every RPC against lapsed', () => {
  let lapsed;
  let client;
  before(async () => {
    lapsed = await LapsedProcess.start(process.env.LAPSED);
    client = new Client(lapsed.address);
  });
  after(async () => {
    client.close();
    assert.equal(await lapsed.stop(), 0);
  });

  it('puts with a ttl, an absolute time or none, and reads the deadlines back', async () => {
    const at = new Date(Date.now() + 3600e3);
    const put = await client.putMembers('put', [
      {key: 'ttl', value: 'a', expiration: Expiration.ttl(60e3)},
      {key: 'at', value: Buffer.from([0, 1]), expiration: Expiration.at(at)},
      {key: 'none', value: 'c'},
    ]);
    assert.deepEqual(put.map((r) => [r.key, r.outcome]),
        [['ttl', 'CREATED'], ['at', 'CREATED'], ['none', 'CREATED']]);
    assert.ok(put[0].expireTime.getTime() >= Date.now() + 50e3);
    assert.equal(put[1].expireTime.getTime(), at.getTime());
    assert.equal(put[2].expireTime, null);

    const got = await client.getMembers('put', ['at', 'none', 'missing']);
    assert.deepEqual(got.map((r) => r.found), [true, true, false]);
    assert.deepEqual(got[0].member.value, Buffer.from([0, 1]));
    assert.equal(got[1].member.value.toString(), 'c');
    assert.equal(got[2].member.key, 'missing');
  });

  it('skips an IF_ABSENT write of a member that exists and keeps its deadline', async () => {
    await client.putMembers('cond', [{key: 'k', value: '1', expiration: Expiration.ttl(60e3)}]);
    const [skipped] =
        await client.putMembers('cond', [{key: 'k', value: '2', condition: 'IF_ABSENT'}]);
    assert.equal(skipped.outcome, 'SKIPPED');
    const [kept] = await client.putMembers('cond',
        [{key: 'k', value: '3', condition: 'IF_PRESENT', keepExpiration: true}]);
    assert.equal(kept.outcome, 'REPLACED');
    assert.ok(kept.expireTime instanceof Date);
  });

  it('refuses a write past maxMembers with FAILED_PRECONDITION and writes nothing', async () => {
    await client.putMembers('max', [{key: 'a'}, {key: 'b'}], {maxMembers: 2});
    await assert.rejects(client.putMembers('max', [{key: 'c'}], {maxMembers: 2}),
        (err) => err instanceof LapseError && err.code === status.FAILED_PRECONDITION);
    assert.equal((await client.getCollection('max')).memberCount, 2n);
  });

  it('slides deadlines with a refreshing get', async () => {
    await client.putMembers('refresh', [{key: 'k', expiration: Expiration.ttl(60e3)}]);
    const at = new Date(Date.now() + 7200e3);
    const [got] = await client.getMembers('refresh', ['k'], {refresh: Expiration.at(at)});
    assert.equal(got.member.expireTime.getTime(), at.getTime());
  });

  it('removes, expires and persists members with their outcomes', async () => {
    await client.putMembers('life', [
      {key: 'a', expiration: Expiration.ttl(60e3)}, {key: 'b'}, {key: 'c'}, {key: 'd'},
    ]);
    assert.deepEqual(await client.removeMembers('life', ['d', 'd2']),
        [{key: 'd', existed: true}, {key: 'd2', existed: false}]);
    const expired = await client.expireMembers('life', ['a', 'b', 'x'], Expiration.ttl(120e3),
        {condition: 'IF_HAS_EXPIRATION'});
    assert.deepEqual(expired.map((r) => r.outcome), ['UPDATED', 'CONDITION_NOT_MET', 'NOT_FOUND']);
    const [now] =
        await client.expireMembers('life', ['c'], Expiration.at(new Date(Date.now() - 1000)));
    assert.equal(now.outcome, 'EXPIRED');
    const persisted = await client.persistMembers('life', ['a', 'b', 'c']);
    assert.deepEqual(persisted.map((r) => r.outcome), ['PERSISTED', 'NO_EXPIRATION', 'NOT_FOUND']);
  });

  it('pages through members by key and by deadline, and through collections', async () => {
    await client.putMembers('list', [
      {key: 'k1', value: 'v', expiration: Expiration.ttl(90e3)},
      {key: 'k2', value: 'v', expiration: Expiration.ttl(30e3)},
      {key: 'k3', value: 'v'},
    ]);
    const first = await client.listMembers('list', {pageSize: 2});
    assert.deepEqual(first.members.map((m) => m.key), ['k1', 'k2']);
    const rest = await client.listMembers('list', {pageSize: 2, pageToken: first.nextPageToken});
    assert.deepEqual(rest.members.map((m) => m.key), ['k3']);
    assert.equal(rest.nextPageToken, '');
    const byTime = await client.listMembers('list', {orderBy: 'EXPIRE_TIME', keysOnly: true});
    assert.deepEqual(byTime.members.map((m) => m.key), ['k2', 'k1', 'k3']);
    assert.equal(byTime.members[0].value.length, 0);

    const info = await client.getCollection('list');
    assert.equal(info.memberCount, 3n);
    assert.equal(info.expiringCount, 2n);
    assert.ok(info.nextExpireTime instanceof Date);
    const page = await client.listCollections({prefix: 'lis'});
    assert.deepEqual(page.collections.map((c) => c.name), ['list']);
  });

  it('deletes a collection and then answers NOT_FOUND for it', async () => {
    await client.putMembers('gone', [{key: 'a'}, {key: 'b'}]);
    assert.equal(await client.deleteCollection('gone'), 2n);
    assert.equal(await client.deleteCollection('gone'), 0n);
    await assert.rejects(client.getCollection('gone'),
        (err) => err instanceof LapseError && err.code === status.NOT_FOUND &&
            err.codeName === 'NOT_FOUND');
  });

  it('maps bad input to LapseError INVALID_ARGUMENT naming the field', async () => {
    await assert.rejects(
        client.putMembers('bad', [{key: 'a'}, {key: 'b', expiration: Expiration.ttl(-5)}]),
        (err) => err instanceof LapseError && err.code === status.INVALID_ARGUMENT &&
            /members\[1\]\.ttl/.test(err.message));
    await assert.rejects(client.putMembers('bad', [{key: 'a', condition: 'IF_MAYBE'}]),
        (err) => err.code === status.INVALID_ARGUMENT &&
            /members\[0\]\.condition/.test(err.message));
    await assert.rejects(client.getCollection('bad'), (err) => err.code === status.NOT_FOUND);
  });
});

// A LapseService whose every call fails UNAVAILABLE (or, with `hang`, never
// answers); counts calls per method.
async function startFakeServer({hang = false} = {}) {
  const server = new grpc.Server();
  const calls = {};
  const handlers = {};
  for (const name of Object.keys(loadService().service)) {
    handlers[name] = (call, callback) => {
      calls[name] = (calls[name] ?? 0) + 1;
      if (!hang) callback({code: status.UNAVAILABLE, details: 'fake: unavailable'});
    };
  }
  server.addService(loadService().service, handlers);
  const port = await new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0',
      grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return {server, calls, address: `127.0.0.1:${port}`};
}

describe('retries and deadlines', () => {
  const fast = {maxAttempts: 4, retryBackoff: {initialMs: 1, maxMs: 2, multiplier: 2}};

  it('retries idempotent calls on UNAVAILABLE up to maxAttempts', async () => {
    const fake = await startFakeServer();
    const client = new Client(fake.address, fast);
    for (const call of [() => client.removeMembers('c', ['k']), () => client.getMembers('c', ['k']),
      () => client.persistMembers('c', ['k']), () => client.listMembers('c'),
      () => client.getCollection('c'), () => client.listCollections(),
      () => client.deleteCollection('c')]) {
      await assert.rejects(call(), (err) => err.code === status.UNAVAILABLE);
    }
    assert.deepEqual(fake.calls, {RemoveMembers: 4, GetMembers: 4, PersistMembers: 4,
      ListMembers: 4, GetCollection: 4, ListCollections: 4, DeleteCollection: 4});
    client.close();
    fake.server.forceShutdown();
  });

  it('attempts writes whose repetition could change the outcome exactly once', async () => {
    const fake = await startFakeServer();
    const client = new Client(fake.address, fast);
    await assert.rejects(client.putMembers('c', [{key: 'k'}]),
        (err) => err.code === status.UNAVAILABLE);
    await assert.rejects(client.expireMembers('c', ['k'], Expiration.ttl(1000)),
        (err) => err.code === status.UNAVAILABLE);
    await assert.rejects(client.getMembers('c', ['k'], {refresh: Expiration.ttl(1000)}),
        (err) => err.code === status.UNAVAILABLE);
    assert.deepEqual(fake.calls, {PutMembers: 1, ExpireMembers: 1, GetMembers: 1});
    client.close();
    fake.server.forceShutdown();
  });

  it('ends a call that gets no answer at its own deadline', async () => {
    const fake = await startFakeServer({hang: true});
    const client = new Client(fake.address, {timeoutMs: 60e3});
    await assert.rejects(client.getCollection('c', {timeoutMs: 100}),
        (err) => err instanceof LapseError && err.code === status.DEADLINE_EXCEEDED);
    client.close();
    fake.server.forceShutdown();
  });
});
