// ExpiryWatch: WatchExpirations as an async iterable of expiry events
// ({sequence: BigInt, collection, key, value: Buffer, expireTime: Date,
// expiredAt: Date}), in sequence order, each once.
//
//   const watch = client.watch({collectionPrefix: 'unpaid:', includeValues: true});
//   for await (const event of watch) { ... }   // `break` or watch.cancel() ends it
//
// Options: `collections` (a list) or `collectionPrefix`, `includeValues`,
// `start`: 'NEW' (default), 'OLDEST', 'AFTER_TOKEN' with `resumeToken` (a
// Buffer, a previous watch's `resumeToken`) or 'AFTER_SEQUENCE' with
// `afterSequence` (a BigInt, a previous watch's `position`), `signal`
// (an AbortSignal that ends the iteration), and the callbacks
// `onConnected()` (a stream is in place) and `onReconnecting(err)` (it broke
// and will resume; a promise it returns is awaited before the reconnect).
//
// When a stream breaks (UNAVAILABLE, a dropped connection, a server restart)
// the watch reconnects after a backoff and resumes right after the last
// position it examined, by the last response's resume_token
// (START_POSITION_AFTER_TOKEN; by examined_sequence only before any token), so
// the events form one stream with no gap and no duplicate. The one way to
// lose events is for the server to no longer hold them, or to serve another
// store (a memory-only lapsed that restarted): the iteration then throws
// LapseError OUT_OF_RANGE, never skips. Any other error (INVALID_ARGUMENT for a bad
// filter, ...) is thrown too and ends the iteration. These are the rules of
// the C++ client's watch (client/cpp/watch_loop.cc), including its caveat: a
// 'NEW' watch learns its position from its first response; if the first
// stream drops before any, and the server does not name the last sequence it
// delivered (a draining lapse server does), the watch starts new again.
'use strict';

const {setTimeout: sleep} = require('node:timers/promises');
const {Backoff} = require('./backoff');
const {eventFromProto} = require('./convert');
const {LapseError, status} = require('./errors');

// Streams that end like this are resumed: the server went away or is
// draining, a connection dropped, or something between us ended the stream
// (our own cancellation is checked first).
const resumable = new Set([status.OK, status.UNAVAILABLE, status.CANCELLED]);

// "server shutting down; last delivered sequence N" (README, WatchExpirations).
function lastDeliveredSequence(details) {
  const match = /last delivered sequence (\d+)/.exec(details ?? '');
  return match ? BigInt(match[1]) : undefined;
}

const startPositions = ['NEW', 'OLDEST', 'AFTER_SEQUENCE', 'AFTER_TOKEN'];

class ExpiryWatch {
  // `ended` is called once the watch is cancelled or its iteration ends.
  // `metadata()` is each stream's metadata (the bearer token).
  constructor(stub, options, backoffPolicy, ended, metadata) {
    if (options.start !== undefined && !startPositions.includes(options.start)) {
      throw new LapseError(status.INVALID_ARGUMENT,
          `start: must be one of ${startPositions.join(', ')}, got ${options.start}`);
    }
    if (options.start === 'AFTER_SEQUENCE' && typeof options.afterSequence !== 'bigint') {
      throw new LapseError(status.INVALID_ARGUMENT, 'afterSequence: a BigInt is required with ' +
          `start AFTER_SEQUENCE, got ${options.afterSequence}`);
    }
    if (options.start === 'AFTER_TOKEN' && !Buffer.isBuffer(options.resumeToken)) {
      throw new LapseError(status.INVALID_ARGUMENT, 'resumeToken: a Buffer is required with ' +
          `start AFTER_TOKEN, got ${options.resumeToken}`);
    }
    this.stub = stub;
    this.ended = ended;
    this.metadata = metadata;
    this.options = options;
    this.backoffPolicy = backoffPolicy;
    this.aborter = new AbortController();
    if (options.signal) {
      if (options.signal.aborted) this.aborter.abort();
      options.signal.addEventListener('abort', () => this.aborter.abort(), {once: true});
    }
    // Every event up to and including this sequence has been examined and,
    // if it matched, returned by the iteration: a later watch with 'AFTER_SEQUENCE'
    // from here continues with no gap and no duplicate. Undefined until known.
    this.position = options.start === 'AFTER_SEQUENCE' ? options.afterSequence : undefined;
    // The same position as the server's opaque token (it also names the
    // store): a later watch with 'AFTER_TOKEN' from here continues. Undefined
    // until the first response.
    this.resumeToken = options.start === 'AFTER_TOKEN' ? options.resumeToken : undefined;
    this.iterated = false;
  }

  // Ends the iteration (it returns, as after `break`). Idempotent.
  cancel() {
    this.aborter.abort();
    this.ended();
  }

  [Symbol.asyncIterator]() {
    if (this.iterated) throw new Error('an ExpiryWatch can be iterated only once');
    this.iterated = true;
    return this.iterate();
  }

  async* iterate() {
    try {
      yield* this.run();
    } finally {
      this.ended();
    }
  }

  request() {
    const o = this.options;
    const request = {
      collections: o.collections ?? [],
      collectionPrefix: o.collectionPrefix ?? '',
      includeValues: Boolean(o.includeValues),
    };
    if (this.resumeToken !== undefined) {
      request.startPosition = 'START_POSITION_AFTER_TOKEN';
      request.resumeToken = this.resumeToken;
    } else if (this.position !== undefined) {
      request.startPosition = 'START_POSITION_AFTER_SEQUENCE';
      request.afterSequence = this.position.toString();
    } else {
      request.startPosition = `START_POSITION_${o.start ?? 'NEW'}`;
    }
    return request;
  }

  async* run() {
    const backoff = new Backoff(this.backoffPolicy);
    const signal = this.aborter.signal;
    while (!signal.aborted) {
      let call;
      try {
        call = this.stub.WatchExpirations(this.request(), this.metadata());
      } catch (err) {
        throw LapseError.fromGrpc(err);
      }
      // Errors after cancel() or after the iteration stopped reading land here.
      call.on('error', () => {});
      const cancel = () => call.cancel();
      signal.addEventListener('abort', cancel, {once: true});
      if (this.options.onConnected) call.on('metadata', () => this.options.onConnected());
      let gotResponse = false;
      let end = {code: status.OK, details: ''};
      try {
        for await (const response of call) {
          gotResponse = true;
          for (const proto of response.events) {
            const event = eventFromProto(proto);
            if (this.position !== undefined && event.sequence <= this.position) continue;
            this.position = event.sequence;
            yield event;
          }
          const examined = BigInt(response.examinedSequence);
          if (this.position === undefined || examined > this.position) this.position = examined;
          if (response.resumeToken.length > 0) this.resumeToken = response.resumeToken;
        }
      } catch (err) {
        end = err;
      } finally {
        signal.removeEventListener('abort', cancel);
        call.cancel();
      }
      if (signal.aborted) return;
      if (!resumable.has(end.code)) throw LapseError.fromGrpc(end);
      if (gotResponse) backoff.reset();
      if (this.position === undefined) this.position = lastDeliveredSequence(end.details);
      if (this.options.onReconnecting) await this.options.onReconnecting(LapseError.fromGrpc(end));
      try {
        await sleep(backoff.next(), undefined, {signal});
      } catch {
        return;  // aborted
      }
    }
  }
}

module.exports = {ExpiryWatch};
