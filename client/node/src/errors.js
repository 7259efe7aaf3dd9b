// LapseError: how every failed call and watch of this client ends. It carries
// the gRPC status code (`code`, a number as in `status`, and `codeName`, e.g.
// 'OUT_OF_RANGE') and the server's message, which names the field at fault
// for INVALID_ARGUMENT ('members[0].ttl: must be positive').
//
//   try { await client.getCollection('nothing'); } catch (err) {
//     if (err instanceof LapseError && err.code === status.NOT_FOUND) ...
//   }
'use strict';

const {status} = require('@grpc/grpc-js');

const codeNames = Object.fromEntries(Object.entries(status).map(([name, code]) => [code, name]));

class LapseError extends Error {
  // `code`: a gRPC status code; `details`: what happened; `metadata`: the
  // trailers, when the server sent them.
  constructor(code, details, metadata = undefined) {
    super(`${codeNames[code] ?? code}: ${details}`);
    this.name = 'LapseError';
    this.code = code;
    this.codeName = codeNames[code] ?? String(code);
    this.details = details;
    this.metadata = metadata;
  }

  // The LapseError for an error of @grpc/grpc-js (a ServiceError).
  static fromGrpc(err) {
    if (err instanceof LapseError) return err;
    const code = typeof err.code === 'number' ? err.code : status.UNKNOWN;
    return new LapseError(code, err.details ?? err.message, err.metadata);
  }
}

module.exports = {LapseError, status};
