// The Node client of lapse (README.md here): Client, the Expiration helper,
// ExpiryWatch, Worker (consumer groups), LapseError and gRPC's status codes.
'use strict';

const {Client} = require('./client');
const {Expiration} = require('./convert');
const {LapseError, status} = require('./errors');
const {Worker} = require('./groups');
const {ExpiryWatch} = require('./watch');

module.exports = {Client, Expiration, ExpiryWatch, LapseError, Worker, status};
