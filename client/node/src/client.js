// Client: lapse.v1.LapseService from Node, one promise-returning method per
// RPC, taking and returning plain values (see convert.js). The stubs come
// from proto/lapse/v1/lapse.proto, loaded at run time by
// @grpc/proto-loader: no generated code to drift.
//
// Every call has a deadline: options.timeoutMs of the client, or the call's
// own {timeoutMs}. Calls that are safe to repeat are retried on UNAVAILABLE
// with exponential backoff and jitter, within that deadline; writes whose
// repetition could change the outcome (putMembers, expireMembers, a
// refreshing getMembers) are attempted exactly once. Other errors are never
// retried, RESOURCE_EXHAUSTED included. These are the C++ client's rules
// (client/cpp/include/lapse/client.h). Failures reject with LapseError.
//
//   const client = new Client('127.0.0.1:50051');
//   await client.putMembers('unpaid:user-42',
//       [{key: 'order-17', value: '{"total": 12}', expiration: Expiration.ttl(30 * 60e3)}],
//       {maxMembers: 3});
//   for await (const event of client.watch({collectionPrefix: 'unpaid:'})) { ... }
//   client.close();
//
// options.credentials (a grpc.ChannelCredentials, default plaintext) is where
// TLS and call credentials go.
'use strict';

const path = require('node:path');
const {setTimeout: sleep} = require('node:timers/promises');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const {Backoff} = require('./backoff');
const convert = require('./convert');
const {LapseError, status} = require('./errors');
const {ExpiryWatch} = require('./watch');

const defaultProtoDir = path.resolve(__dirname, '../../../proto');

const defaults = Object.freeze({
  // The deadline of a call, all its attempts, unless the call says otherwise.
  timeoutMs: 10000,
  // Attempts of a retryable call, the first included; 1 disables retries.
  maxAttempts: 4,
  retryBackoff: {initialMs: 50, maxMs: 2000, multiplier: 2},
  // Between reconnects of a watch; reset by every response.
  watchBackoff: {initialMs: 100, maxMs: 10000, multiplier: 2},
  // Match the server's --max_message_bytes.
  maxMessageBytes: 16 << 20,
  // gRPC's own backoff between connection attempts.
  reconnectBackoffInitialMs: 1000,
  reconnectBackoffMaxMs: 30000,
  // HTTP/2 keepalive pings while calls are open; 0 disables them (the server
  // must allow the interval).
  keepaliveTimeMs: 0,
  keepaliveTimeoutMs: 20000,
  // Where lapse/v1/lapse.proto is: the repository's proto/ by default.
  protoDir: defaultProtoDir,
  // grpc.credentials.createInsecure() unless set.
  credentials: undefined,
});

const loadedServices = new Map();

// The LapseService client constructor of lapse.proto under `protoDir`; its
// `service` is the definition a grpc.Server takes (tests serve fakes with it).
function loadService(protoDir = defaultProtoDir) {
  if (!loadedServices.has(protoDir)) {
    const definition = protoLoader.loadSync('lapse/v1/lapse.proto', {
      includeDirs: [protoDir],
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    loadedServices.set(protoDir, grpc.loadPackageDefinition(definition).lapse.v1.LapseService);
  }
  return loadedServices.get(protoDir);
}

const putConditions = ['IF_ABSENT', 'IF_PRESENT'];
const expireConditions = ['IF_NO_EXPIRATION', 'IF_HAS_EXPIRATION', 'IF_LATER', 'IF_EARLIER'];
const memberOrders = ['KEY', 'EXPIRE_TIME'];

class Client {
  // `target`: "host:port" or any gRPC target; `options`: see `defaults`.
  constructor(target, options = {}) {
    this.options = {...defaults, ...options};
    const o = this.options;
    const channelOptions = {
      'grpc.max_receive_message_length': o.maxMessageBytes,
      'grpc.max_send_message_length': o.maxMessageBytes,
      'grpc.initial_reconnect_backoff_ms': o.reconnectBackoffInitialMs,
      'grpc.max_reconnect_backoff_ms': o.reconnectBackoffMaxMs,
    };
    if (o.keepaliveTimeMs > 0) {
      channelOptions['grpc.keepalive_time_ms'] = o.keepaliveTimeMs;
      channelOptions['grpc.keepalive_timeout_ms'] = o.keepaliveTimeoutMs;
    }
    // The watches running on this client, which close() ends.
    this.watches = new Set();
    const Service = loadService(o.protoDir);
    this.stub = new Service(target, o.credentials ?? grpc.credentials.createInsecure(),
        channelOptions);
  }

  // Ends the watches of this client (their iterations return) and closes the
  // channel.
  close() {
    for (const watch of this.watches) watch.cancel();
    this.stub.close();
  }

  // Writes `members` ({key, value, expiration, condition: 'IF_ABSENT' |
  // 'IF_PRESENT', keepExpiration}) atomically. With {maxMembers: n}: if the
  // collection would then hold more than n live members, nothing is written
  // and the call fails FAILED_PRECONDITION. Resolves to one {key, outcome:
  // 'CREATED' | 'REPLACED' | 'SKIPPED', expireTime} per member, in order.
  // Never retried.
  async putMembers(collection, members, {maxMembers = 0, timeoutMs} = {}) {
    const request = {
      collection,
      maxMembers,
      members: members.map((m, i) => {
        const write = {
          key: m.key,
          value: convert.bytesToProto(m.value),
          condition: convert.enumToProto('PUT_CONDITION', putConditions, m.condition,
              `members[${i}].condition`),
          keepExpiration: Boolean(m.keepExpiration),
        };
        convert.setExpiration(write, m.expiration, `members[${i}].expiration`, 'expireTime', 'ttl');
        return write;
      }),
    };
    const response = await this.#call('PutMembers', request, false, timeoutMs);
    return response.results.map((r) => ({
      key: r.key,
      outcome: convert.enumFromProto('PUT_OUTCOME', r.outcome),
      expireTime: convert.timeFromProto(r.expireTime),
    }));
  }

  // Resolves to one {found, member: {key, value, expireTime}} per key, in
  // order. With {refresh: an Expiration} the deadline of every member found
  // slides (like HGETEX); such a call is never retried.
  async getMembers(collection, keys, {refresh, timeoutMs} = {}) {
    const request = {collection, keys};
    convert.setExpiration(request, refresh, 'refresh', 'refreshExpireTime', 'refreshTtl');
    const idempotent = refresh === undefined || refresh === null;
    const response = await this.#call('GetMembers', request, idempotent, timeoutMs);
    return response.results.map((r) => ({
      found: r.found,
      member: convert.memberFromProto(r.member),
    }));
  }

  // Deletes members (no expiry events); one {key, existed} per key. Retried.
  async removeMembers(collection, keys, {timeoutMs} = {}) {
    const response = await this.#call('RemoveMembers', {collection, keys}, true, timeoutMs);
    return response.results.map((r) => ({key: r.key, existed: r.existed}));
  }

  // Sets a new deadline (an Expiration) under {condition: 'IF_NO_EXPIRATION'
  // | 'IF_HAS_EXPIRATION' | 'IF_LATER' | 'IF_EARLIER'}. A deadline in the
  // past expires the members now, with their events. One {key, outcome:
  // 'UPDATED' | 'CONDITION_NOT_MET' | 'NOT_FOUND' | 'EXPIRED', expireTime}
  // per key. Never retried.
  async expireMembers(collection, keys, expiration, {condition, timeoutMs} = {}) {
    const request = {
      collection,
      keys,
      condition: convert.enumToProto('EXPIRE_CONDITION', expireConditions, condition, 'condition'),
    };
    convert.setExpiration(request, expiration, 'expiration', 'expireTime', 'ttl');
    const response = await this.#call('ExpireMembers', request, false, timeoutMs);
    return response.results.map((r) => ({
      key: r.key,
      outcome: convert.enumFromProto('EXPIRE_OUTCOME', r.outcome),
      expireTime: convert.timeFromProto(r.expireTime),
    }));
  }

  // Clears deadlines: one {key, outcome: 'PERSISTED' | 'NO_EXPIRATION' |
  // 'NOT_FOUND'} per key. Retried.
  async persistMembers(collection, keys, {timeoutMs} = {}) {
    const response = await this.#call('PersistMembers', {collection, keys}, true, timeoutMs);
    return response.results.map((r) => ({
      key: r.key,
      outcome: convert.enumFromProto('PERSIST_OUTCOME', r.outcome),
    }));
  }

  // One page {members, nextPageToken} of a collection, {orderBy: 'KEY' |
  // 'EXPIRE_TIME', pageSize, pageToken, keysOnly}. Only an empty
  // nextPageToken ends the listing. Retried.
  async listMembers(collection, {orderBy, pageSize = 0, pageToken = '', keysOnly = false,
    timeoutMs} = {}) {
    const request = {
      collection,
      pageSize,
      pageToken,
      keysOnly,
      orderBy: convert.enumToProto('MEMBER_ORDER', memberOrders, orderBy, 'orderBy'),
    };
    const response = await this.#call('ListMembers', request, true, timeoutMs);
    return {
      members: response.members.map(convert.memberFromProto),
      nextPageToken: response.nextPageToken,
    };
  }

  // {name, memberCount, expiringCount, nextExpireTime}; NOT_FOUND when the
  // collection has no live member. Retried.
  async getCollection(name, {timeoutMs} = {}) {
    const response = await this.#call('GetCollection', {name}, true, timeoutMs);
    return convert.collectionFromProto(response.collection);
  }

  // One page {collections, nextPageToken} of collections, {prefix, pageSize,
  // pageToken}. Retried.
  async listCollections({prefix = '', pageSize = 0, pageToken = '', timeoutMs} = {}) {
    const response =
        await this.#call('ListCollections', {prefix, pageSize, pageToken}, true, timeoutMs);
    return {
      collections: response.collections.map(convert.collectionFromProto),
      nextPageToken: response.nextPageToken,
    };
  }

  // Removes a collection; resolves to how many live members it had (a
  // BigInt, 0n if it did not exist). No expiry events. Retried.
  async deleteCollection(name, {timeoutMs} = {}) {
    const response = await this.#call('DeleteCollection', {name}, true, timeoutMs);
    return BigInt(response.removedCount);
  }

  // An ExpiryWatch (watch.js): an async iterable of expiry events that
  // resumes by itself after a disconnect.
  watch(options = {}) {
    const watch = new ExpiryWatch(this.stub, options, this.options.watchBackoff,
        () => this.watches.delete(watch));
    this.watches.add(watch);
    return watch;
  }

  // Calls the unary `method` until it succeeds, fails with anything but
  // UNAVAILABLE, is not `idempotent`, has used up maxAttempts, or the next
  // backoff would end past the deadline.
  async #call(method, request, idempotent, timeoutMs) {
    const deadline = Date.now() + (timeoutMs ?? this.options.timeoutMs);
    const backoff = new Backoff(this.options.retryBackoff);
    for (let attempts = 1; ; ++attempts) {
      try {
        return await new Promise((resolve, reject) => {
          this.stub[method](request, {deadline: new Date(deadline)},
              (err, response) => (err ? reject(err) : resolve(response)));
        });
      } catch (err) {
        if (!idempotent || err.code !== status.UNAVAILABLE ||
            attempts >= this.options.maxAttempts) {
          throw LapseError.fromGrpc(err);
        }
        const delay = backoff.next();
        if (Date.now() + delay >= deadline) throw LapseError.fromGrpc(err);
        await sleep(delay);
      }
    }
  }
}

module.exports = {Client, loadService};
