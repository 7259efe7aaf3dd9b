// Consumer groups from Node: conversions of their messages, and Worker, the
// loop that hands each delivered event to a handler and acknowledges it.
//
//   await client.createConsumerGroup('cancel-orders', {collectionPrefix: 'unpaid:'});
//   const worker = client.worker('cancel-orders', 'worker-1', async (delivery) => {
//     await cancel(delivery.event.key);           // resolves: acked
//   }, {onError: (delivery, err) => log(err)});   // throws: released (Nack), redelivered
//   const done = worker.run();                    // resolves after worker.stop()
//
// A Worker polls with the long poll (PollRequest.wait, `waitMs`), hands the
// deliveries to the handler one at a time in order, acks each whose handler
// resolved and releases each whose handler threw, so that the group delivers
// it again (to any consumer; after max_deliveries it is dead-lettered).
// A poll that fails UNAVAILABLE (a restart, a dropped connection) is tried
// again after a backoff under the same consumer name, which keeps its
// leases. An empty answer just polls again; one that came back sooner than
// half the wait (a server that does not wait) first pauses for the client's
// idlePollBackoff, so the loop never spins. Events the group lost to the
// server's retention are never skipped silently: the poll that reports them
// ends run() with LapseError OUT_OF_RANGE carrying `lostFirstSequence` and
// `lostLastSequence` (its deliveries released), unless `onLost(err)` is
// given, which is then told and the loop goes on. Any other poll error ends
// run() with it. A failed ack or release (FAILED_PRECONDITION: the lease
// ran out and the event went to another consumer, or the server could not
// be reached) goes to `onError(delivery, err)`, as does the handler's
// exception; without onError they are ignored, the event being redelivered.
'use strict';

const {setTimeout: sleep} = require('node:timers/promises');
const {Backoff} = require('./backoff');
const convert = require('./convert');
const {LapseError, status} = require('./errors');

// uint64 fields of ConsumerGroup, BigInts here.
const groupCounters = ['position', 'lag', 'pending', 'awaitingRedelivery', 'deadLettered',
  'deliveredTotal', 'ackedTotal', 'lostSequencesTotal'];

function durationFromProto(duration) {
  if (!duration) return null;
  return Number(duration.seconds) * 1000 + Math.floor(duration.nanos / 1e6);
}

// A ConsumerGroup message as {name, collections, collectionPrefix,
// includeValues, visibilityTimeoutMs, maxDeliveries, maxUnackedPerConsumer,
// position, lag, pending, ... (BigInts), consumers: [{name, unacked,
// lastSeen}], leases: [{sequence, consumer, deliveryCount, deadline}]}.
function groupFromProto(group) {
  const result = {
    name: group.name,
    collections: group.collections,
    collectionPrefix: group.collectionPrefix,
    includeValues: group.includeValues,
    visibilityTimeoutMs: durationFromProto(group.visibilityTimeout),
    maxDeliveries: group.maxDeliveries,
    maxUnackedPerConsumer: group.maxUnackedPerConsumer,
    consumers: group.consumers.map((c) => ({
      name: c.name,
      unacked: BigInt(c.unacked),
      lastSeen: convert.timeFromProto(c.lastSeen),
    })),
    leases: group.leases.map((l) => ({
      sequence: BigInt(l.sequence),
      consumer: l.consumer,
      deliveryCount: l.deliveryCount,
      deadline: convert.timeFromProto(l.deadline),
    })),
  };
  for (const counter of groupCounters) result[counter] = BigInt(group[counter]);
  return result;
}

// {event, deliveryCount, leaseDeadline}: what a handler gets, and what ack,
// nack and extendLeases take.
function deliveryFromProto(delivery) {
  return {
    event: convert.eventFromProto(delivery.event),
    deliveryCount: delivery.deliveryCount,
    leaseDeadline: convert.timeFromProto(delivery.leaseDeadline),
  };
}

// The LeaseRefs of `deliveries` (as poll returned them).
function leasesToProto(deliveries) {
  return deliveries.map((d) => ({
    sequence: d.event.sequence.toString(),
    deliveryCount: d.deliveryCount,
  }));
}

// One {sequence, code, message} per lease; code 0 (OK) or
// status.FAILED_PRECONDITION (the lease is not held).
function leaseResultsFromProto(results) {
  return results.map((r) => ({sequence: BigInt(r.sequence), code: r.code, message: r.message}));
}

// The LapseError OUT_OF_RANGE for a poll that reports lost sequences.
function lostEventsError(group, first, last) {
  const err = new LapseError(status.OUT_OF_RANGE,
      `consumer group ${group} lost events ${first}..${last}: the server's event retention ` +
      'discarded them before the group received them; they will not be delivered');
  err.lostFirstSequence = first;
  err.lostLastSequence = last;
  return err;
}

class Worker {
  // Made by Client.worker().
  constructor(client, group, consumer, handler, {maxEvents = 10, waitMs = 10000, onLost,
    onError} = {}) {
    this.client = client;
    this.group = group;
    this.consumer = consumer;
    this.handler = handler;
    this.maxEvents = maxEvents;
    this.waitMs = waitMs;
    this.onLost = onLost;
    this.onError = onError ?? (() => {});
    this.aborter = new AbortController();
  }

  // Ends run(): a poll in flight is cancelled; deliveries not yet handled are
  // released. Idempotent.
  stop() {
    this.aborter.abort();
  }

  // Polls and handles until stop() (resolves) or an error (rejects).
  async run() {
    const signal = this.aborter.signal;
    const options = this.client.options;
    const errors = new Backoff(options.retryBackoff);
    const idle = new Backoff(options.idlePollBackoff);
    while (!signal.aborted) {
      const started = Date.now();
      let result;
      try {
        result = await this.client.poll(this.group, this.consumer,
            {maxEvents: this.maxEvents, waitMs: this.waitMs, signal});
      } catch (err) {
        if (signal.aborted) return;
        if (err.code !== status.UNAVAILABLE) throw err;
        await this.#pause(errors.next());
        continue;
      }
      errors.reset();
      if (result.lost) {
        const err = lostEventsError(this.group, result.lost.first, result.lost.last);
        if (!this.onLost) {
          await this.#settle('nack', result.deliveries);
          throw err;
        }
        this.onLost(err);
      }
      if (result.deliveries.length === 0) {
        if (Date.now() - started < this.waitMs / 2) await this.#pause(idle.next());
        continue;
      }
      idle.reset();
      await this.#handle(result.deliveries);
    }
  }

  async #handle(deliveries) {
    for (let i = 0; i < deliveries.length; ++i) {
      if (this.aborter.signal.aborted) {
        await this.#settle('nack', deliveries.slice(i));
        return;
      }
      const delivery = deliveries[i];
      let handled = true;
      try {
        await this.handler(delivery);
      } catch (err) {
        handled = false;
        this.onError(delivery, err);
      }
      await this.#settle(handled ? 'ack' : 'nack', [delivery]);
    }
  }

  // Acks or releases `deliveries`; failures go to onError.
  async #settle(method, deliveries) {
    if (deliveries.length === 0) return;
    let results;
    try {
      results = await this.client[method](this.group, this.consumer, deliveries);
    } catch (err) {
      for (const delivery of deliveries) this.onError(delivery, err);
      return;
    }
    results.forEach((r, i) => {
      if (r.code !== status.OK) this.onError(deliveries[i], new LapseError(r.code, r.message));
    });
  }

  async #pause(ms) {
    try {
      await sleep(ms, undefined, {signal: this.aborter.signal});
    } catch {
      // stop(): run()'s loop sees it.
    }
  }
}

module.exports = {Worker, deliveryFromProto, groupFromProto, leaseResultsFromProto, leasesToProto};
