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
// Security (README's Security section), as the C++ client's ClientOptions:
// options.tls = {caFile, certFile, keyFile, serverName} turns TLS on (caFile
// unset: the system's CAs; certFile and keyFile: mTLS); options.bearerToken,
// or options.bearerTokenFile (read again at every call, so a rotated token is
// picked up), is sent as "authorization: Bearer TOKEN" with every call and
// watch. options.credentials (a grpc.ChannelCredentials) replaces tls for
// anything else. Consumer groups: the group calls below and worker()
// (groups.js).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const {setTimeout: sleep} = require('node:timers/promises');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const {Backoff} = require('./backoff');
const convert = require('./convert');
const {LapseError, status} = require('./errors');
const groups = require('./groups');
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
  // {caFile, certFile, keyFile, serverName}: TLS; undefined: plaintext.
  tls: undefined,
  // The bearer token, or the file holding it; at most one.
  bearerToken: undefined,
  bearerTokenFile: undefined,
  // Channel credentials other than tls'; at most one of the two.
  credentials: undefined,
  // A worker's pause after an empty poll that the server answered sooner
  // than half the wait (it did not wait); reset by every delivery.
  idlePollBackoff: {initialMs: 200, maxMs: 2000, multiplier: 2},
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
const startPositions = ['NEW', 'OLDEST', 'AFTER_SEQUENCE'];

function invalidOption(field, what) {
  return new LapseError(status.INVALID_ARGUMENT, `options.${field}: ${what}`);
}

// A file's contents for options.`field`; INVALID_ARGUMENT naming the option
// and the file when it cannot be read.
function readOption(field, file) {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw invalidOption(field, `cannot read ${file}: ${err.message}`);
  }
}

// The channel credentials and channel options of options.tls/credentials.
function channelCredentials(o, channelOptions) {
  if (o.tls && o.credentials) throw invalidOption('tls', 'set tls or credentials, not both');
  if (o.credentials) return o.credentials;
  if (!o.tls) return grpc.credentials.createInsecure();
  const {caFile, certFile, keyFile, serverName} = o.tls;
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw invalidOption('tls', 'certFile and keyFile go together (mTLS)');
  }
  if (serverName) channelOptions['grpc.ssl_target_name_override'] = serverName;
  return grpc.credentials.createSsl(caFile ? readOption('tls.caFile', caFile) : null,
      keyFile ? readOption('tls.keyFile', keyFile) : null,
      certFile ? readOption('tls.certFile', certFile) : null);
}

// The group's start: 'NEW' (default), 'OLDEST' or 'AFTER_SEQUENCE' with
// afterSequence (a BigInt).
function startToProto(start, afterSequence) {
  const position = convert.enumToProto('START_POSITION', startPositions, start, 'start');
  if (start === 'AFTER_SEQUENCE' && typeof afterSequence !== 'bigint') {
    throw new LapseError(status.INVALID_ARGUMENT,
        `afterSequence: a BigInt is required with start AFTER_SEQUENCE, got ${afterSequence}`);
  }
  return {startPosition: position, afterSequence: (afterSequence ?? 0n).toString()};
}

function durationOption(ms, field) {
  return ms === undefined ? null : convert.durationToProto(ms, field);
}

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
    if (o.bearerToken && o.bearerTokenFile) {
      throw invalidOption('bearerToken', 'set bearerToken or bearerTokenFile, not both');
    }
    // The watches running on this client, which close() ends.
    this.watches = new Set();
    const Service = loadService(o.protoDir);
    this.stub = new Service(target, channelCredentials(o, channelOptions), channelOptions);
  }

  // The metadata of every call: the bearer token, if any. UNAUTHENTICATED
  // naming the file when bearerTokenFile cannot be read or is empty.
  metadata() {
    const metadata = new grpc.Metadata();
    let token = this.options.bearerToken;
    const file = this.options.bearerTokenFile;
    if (file) {
      try {
        token = fs.readFileSync(file, 'utf8').trim();
      } catch (err) {
        throw new LapseError(status.UNAUTHENTICATED,
            `cannot read the bearer token file ${file}: ${err.message}`);
      }
      if (!token) {
        throw new LapseError(status.UNAUTHENTICATED,
            `the bearer token file ${file} is empty: write the token into it`);
      }
    }
    if (token) metadata.set('authorization', `Bearer ${token}`);
    return metadata;
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
        () => this.watches.delete(watch), () => this.metadata());
    this.watches.add(watch);
    return watch;
  }

  // Creates a consumer group reading {collections} or {collectionPrefix}
  // (includeValues), from {start: 'NEW' | 'OLDEST' | 'AFTER_SEQUENCE',
  // afterSequence}, with {visibilityTimeoutMs, maxDeliveries,
  // maxUnackedPerConsumer} (0 or unset: the server's defaults). Resolves to
  // the group (groups.js). ALREADY_EXISTS if it exists. Never retried.
  async createConsumerGroup(name, {collections = [], collectionPrefix = '', includeValues = false,
    start, afterSequence, visibilityTimeoutMs, maxDeliveries = 0, maxUnackedPerConsumer = 0,
    timeoutMs} = {}) {
    const request = {
      name, collections, collectionPrefix, includeValues, maxDeliveries, maxUnackedPerConsumer,
      ...startToProto(start, afterSequence),
      visibilityTimeout: durationOption(visibilityTimeoutMs, 'visibilityTimeoutMs'),
    };
    const response = await this.#call('CreateConsumerGroup', request, false, timeoutMs);
    return groups.groupFromProto(response.group);
  }

  // The group with up to {maxLeases} of its leases; NOT_FOUND. Retried.
  async getConsumerGroup(name, {maxLeases = 0, timeoutMs} = {}) {
    const response = await this.#call('GetConsumerGroup', {name, maxLeases}, true, timeoutMs);
    return groups.groupFromProto(response.group);
  }

  // One page {groups, nextPageToken}, {pageSize, pageToken}. Retried.
  async listConsumerGroups({pageSize = 0, pageToken = '', timeoutMs} = {}) {
    const response =
        await this.#call('ListConsumerGroups', {pageSize, pageToken}, true, timeoutMs);
    return {groups: response.groups.map(groups.groupFromProto),
      nextPageToken: response.nextPageToken};
  }

  // Deletes a group; resolves to it as it was. NOT_FOUND. Never retried.
  async deleteConsumerGroup(name, {timeoutMs} = {}) {
    const response = await this.#call('DeleteConsumerGroup', {name}, false, timeoutMs);
    return groups.groupFromProto(response.group);
  }

  // Moves a group to {start, afterSequence} (as createConsumerGroup's),
  // dropping its pending events. Never retried.
  async resetConsumerGroup(name, {start, afterSequence, timeoutMs} = {}) {
    const request = {name, ...startToProto(start, afterSequence)};
    const response = await this.#call('ResetConsumerGroup', request, false, timeoutMs);
    return groups.groupFromProto(response.group);
  }

  // Leases up to {maxEvents} events to `consumer`, waiting up to {waitMs}
  // for one (the long poll; the call's deadline is timeoutMs after the
  // wait). Resolves to {deliveries: [{event, deliveryCount, leaseDeadline}],
  // lost: {first, last} (BigInts) when the group lost events, else null}.
  // {signal} cancels it. Never retried: a lost answer would leave its events
  // leased until their visibility timeout.
  async poll(group, consumer, {maxEvents = 1, waitMs = 0, signal, timeoutMs} = {}) {
    const request = {group, consumer, maxEvents, wait: durationOption(waitMs, 'waitMs')};
    const response = await this.#call('Poll', request, false,
        (timeoutMs ?? this.options.timeoutMs) + waitMs, signal);
    const lost = response.lostFirstSequence === '0' ? null :
      {first: BigInt(response.lostFirstSequence), last: BigInt(response.lostLastSequence)};
    return {deliveries: response.deliveries.map(groups.deliveryFromProto), lost};
  }

  // Acknowledges `deliveries` (as poll resolved them): one {sequence, code,
  // message} each, code status.FAILED_PRECONDITION when the lease is no
  // longer held (the event may be handled twice). Retried.
  async ack(group, consumer, deliveries, {timeoutMs} = {}) {
    const request = {group, consumer, leases: groups.leasesToProto(deliveries)};
    const response = await this.#call('Ack', request, true, timeoutMs);
    return groups.leaseResultsFromProto(response.results);
  }

  // Releases `deliveries` for redelivery; results as ack's. Retried.
  async nack(group, consumer, deliveries, {timeoutMs} = {}) {
    const request = {group, consumer, leases: groups.leasesToProto(deliveries)};
    const response = await this.#call('Nack', request, true, timeoutMs);
    return groups.leaseResultsFromProto(response.results);
  }

  // Makes the leases of `deliveries` end `extensionMs` from now; results as
  // ack's. Retried.
  async extendLeases(group, consumer, deliveries, extensionMs, {timeoutMs} = {}) {
    const request = {group, consumer, leases: groups.leasesToProto(deliveries),
      extension: durationOption(extensionMs, 'extensionMs')};
    const response = await this.#call('ExtendLeases', request, true, timeoutMs);
    return groups.leaseResultsFromProto(response.results);
  }

  // A Worker (groups.js) of `group` named `consumer` that hands each event to
  // `handler`; options {maxEvents, waitMs, onLost, onError}. Call its run().
  worker(group, consumer, handler, options = {}) {
    return new groups.Worker(this, group, consumer, handler, options);
  }

  // Calls the unary `method` until it succeeds, fails with anything but
  // UNAVAILABLE, is not `idempotent`, has used up maxAttempts, or the next
  // backoff would end past the deadline. `signal` cancels it (CANCELLED).
  async #call(method, request, idempotent, timeoutMs, signal = undefined) {
    const deadline = Date.now() + (timeoutMs ?? this.options.timeoutMs);
    const backoff = new Backoff(this.options.retryBackoff);
    const metadata = this.metadata();
    for (let attempts = 1; ; ++attempts) {
      let cancel;
      try {
        return await new Promise((resolve, reject) => {
          const call = this.stub[method](request, metadata, {deadline: new Date(deadline)},
              (err, response) => (err ? reject(err) : resolve(response)));
          cancel = () => call.cancel();
          if (signal?.aborted) cancel();
          signal?.addEventListener('abort', cancel, {once: true});
        });
      } catch (err) {
        if (!idempotent || err.code !== status.UNAVAILABLE ||
            attempts >= this.options.maxAttempts) {
          throw LapseError.fromGrpc(err);
        }
        const delay = backoff.next();
        if (Date.now() + delay >= deadline) throw LapseError.fromGrpc(err);
        await sleep(delay);
      } finally {
        signal?.removeEventListener('abort', cancel);
      }
    }
  }
}

module.exports = {Client, loadService};
