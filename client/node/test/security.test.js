// The Node client's TLS and bearer-token options against a real lapsed
// (LAPSED, from CMake) with --tls_cert/--tls_key/--tls_client_ca (mTLS) and
// --auth_file: a granted token works, an unknown one fails UNAUTHENTICATED, one
// outside its grants PERMISSION_DENIED, a token file is read, and a client
// without a certificate cannot connect.
//
//   LAPSED=build/dev/server/lapsed NODE_PATH=build/node-client/node_modules \
//     node --test client/node/test/security.test.js
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const {after, before, describe, it} = require('node:test');
const {Client, Expiration, LapseError, status} = require('../src/index');
const {LapsedProcess, makeCerts, tempDir, writeAuthFile} =
    require('../../../testing/node/lapsed_process');

describe('security', () => {
  let lapsed;
  let certs;
  before(async () => {
    certs = makeCerts();
    const auth = writeAuthFile({'s3cret': 'all *', 'reader': 'read orders:'});
    lapsed = await LapsedProcess.start(process.env.LAPSED, [`--tls_cert=${certs.serverCert}`,
      `--tls_key=${certs.serverKey}`, `--tls_client_ca=${certs.ca}`, `--auth_file=${auth}`]);
  });
  after(async () => assert.equal(await lapsed.stop(), 0));

  // A client over mTLS (with certs) sending `token` options.
  function client(tokenOptions) {
    return new Client(`localhost:${lapsed.port}`, {
      tls: {caFile: certs.ca, certFile: certs.clientCert, keyFile: certs.clientKey},
      maxAttempts: 1, timeoutMs: 5000, ...tokenOptions});
  }

  it('accepts a granted token over mTLS, and watches with it', async () => {
    const c = client({bearerToken: 's3cret'});
    const [result] = await c.putMembers('orders:1', [{key: 'a'}]);
    assert.equal(result.outcome, 'CREATED');
    let connected;
    const isConnected = new Promise((resolve) => (connected = resolve));
    const watch = c.watch({collectionPrefix: 'orders:', onConnected: connected});
    const iteration = (async () => {
      for await (const event of watch) return event.key;
    })();
    await isConnected;
    await c.expireMembers('orders:1', ['a'], Expiration.at(new Date(Date.now() - 1000)));
    assert.equal(await iteration, 'a');
    c.close();
  });

  it('reads the token from bearerTokenFile at each call', async () => {
    const file = path.join(tempDir(), 'token');
    fs.writeFileSync(file, 'wrong\n');
    const c = client({bearerTokenFile: file});
    await assert.rejects(c.getMembers('orders:1', ['a']),
        (err) => err instanceof LapseError && err.code === status.UNAUTHENTICATED);
    fs.writeFileSync(file, 's3cret\n');
    const [found] = await c.getMembers('orders:1', ['a']);
    assert.equal(found.found, false);
    c.close();
  });

  it('fails UNAUTHENTICATED for an unknown token and PERMISSION_DENIED outside the grants',
      async () => {
        const unknown = client({bearerToken: 'guess'});
        await assert.rejects(unknown.getMembers('orders:1', ['a']),
            (err) => err instanceof LapseError && err.code === status.UNAUTHENTICATED);
        unknown.close();
        const reader = client({bearerToken: 'reader'});
        await reader.getMembers('orders:1', ['a']);
        await assert.rejects(reader.putMembers('orders:1', [{key: 'b'}]),
            (err) => err instanceof LapseError && err.code === status.PERMISSION_DENIED &&
                /write/.test(err.message));
        await assert.rejects(async () => {
          for await (const event of reader.watch({collectionPrefix: 'orders:'})) assert.fail(event);
        }, (err) => err instanceof LapseError && err.code === status.PERMISSION_DENIED);
        reader.close();
      });

  it('cannot connect without a client certificate', async () => {
    const c = new Client(`localhost:${lapsed.port}`, {tls: {caFile: certs.ca},
      bearerToken: 's3cret', maxAttempts: 1, timeoutMs: 5000});
    await assert.rejects(c.getMembers('orders:1', ['a']),
        (err) => err instanceof LapseError && err.code === status.UNAVAILABLE);
    c.close();
  });

  it('refuses a certificate without its key, naming the option', () => {
    assert.throws(() => new Client('localhost:1', {tls: {certFile: certs.clientCert}}),
        (err) => err instanceof LapseError && err.code === status.INVALID_ARGUMENT &&
            /options\.tls/.test(err.message));
  });
});
