// Conversions between this client's values and the messages of
// proto/lapse/v1/lapse.proto as @grpc/proto-loader represents them (camelCase
// fields, 64-bit integers as decimal strings, enums as names). Times are
// Dates (the server keeps milliseconds), sequences BigInts, values Buffers.
//
// Client-side mistakes (an unknown condition name, a TTL that is not a
// number) throw LapseError INVALID_ARGUMENT naming the field, like the
// server does, before anything is sent.
'use strict';

const {LapseError, status} = require('./errors');

// The expiration of a write (AIP-214): Expiration.ttl(ms) counts from the
// server's clock, Expiration.at(date) is absolute; null or undefined: none.
const Expiration = Object.freeze({
  ttl(ms) {
    return Object.freeze({ttlMs: ms});
  },
  at(date) {
    return Object.freeze({at: date instanceof Date ? date : new Date(date)});
  },
});

function invalid(field, what) {
  return new LapseError(status.INVALID_ARGUMENT, `${field}: ${what}`);
}

function durationToProto(ms, field) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) {
    throw invalid(field, `must be a finite number of milliseconds, got ${ms}`);
  }
  const wholeMs = Math.trunc(ms);
  const seconds = Math.trunc(wholeMs / 1000);
  return {seconds: String(seconds), nanos: (wholeMs - seconds * 1000) * 1e6};
}

function timeToProto(date, field) {
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw invalid(field, 'is not a valid Date');
  const seconds = Math.floor(ms / 1000);
  return {seconds: String(seconds), nanos: (ms - seconds * 1000) * 1e6};
}

function timeFromProto(timestamp) {
  if (!timestamp) return null;
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1e6));
}

// Sets the oneof `expireTimeField` / `ttlField` of `message` from an
// Expiration (or nothing when it is null or undefined).
function setExpiration(message, expiration, field, expireTimeField, ttlField) {
  if (expiration === null || expiration === undefined) return;
  if (expiration.at instanceof Date) {
    message[expireTimeField] = timeToProto(expiration.at, field);
  } else if ('ttlMs' in expiration) {
    message[ttlField] = durationToProto(expiration.ttlMs, field);
  } else {
    throw invalid(field, 'must be Expiration.ttl(ms) or Expiration.at(date)');
  }
}

// 'IF_ABSENT' -> 'PUT_CONDITION_IF_ABSENT'; undefined -> the UNSPECIFIED value.
function enumToProto(prefix, names, name, field) {
  if (name === undefined || name === null) return `${prefix}_UNSPECIFIED`;
  if (!names.includes(name)) {
    throw invalid(field, `must be one of ${names.join(', ')}, got ${name}`);
  }
  return `${prefix}_${name}`;
}

// 'PUT_OUTCOME_CREATED' -> 'CREATED'.
function enumFromProto(prefix, value) {
  return value.startsWith(`${prefix}_`) ? value.slice(prefix.length + 1) : value;
}

function bytesToProto(value) {
  return value === undefined || value === null ? Buffer.alloc(0) : Buffer.from(value);
}

function memberFromProto(member) {
  return {key: member.key, value: member.value, expireTime: timeFromProto(member.expireTime)};
}

function collectionFromProto(info) {
  return {
    name: info.name,
    memberCount: BigInt(info.memberCount),
    expiringCount: BigInt(info.expiringCount),
    nextExpireTime: timeFromProto(info.nextExpireTime),
  };
}

function eventFromProto(event) {
  return {
    sequence: BigInt(event.sequence),
    collection: event.collection,
    key: event.key,
    value: event.value,
    expireTime: timeFromProto(event.expireTime),
    expiredAt: timeFromProto(event.expiredAt),
  };
}

module.exports = {
  Expiration,
  setExpiration,
  durationToProto,
  enumToProto,
  enumFromProto,
  bytesToProto,
  timeFromProto,
  memberFromProto,
  collectionFromProto,
  eventFromProto,
};
