package lapse

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failed call: its gRPC status code and the server's message,
// which names the offending field for INVALID_ARGUMENT. OUT_OF_RANGE ends a
// Watch whose events the server no longer holds. status.Code(err) reads the
// code too.
type Error struct {
	Code    codes.Code
	Message string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// GRPCStatus lets status.FromError and status.Code read an *Error.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// errorFrom turns what a stub returned into an *Error.
func errorFrom(err error) *Error {
	s, _ := status.FromError(err)
	return &Error{Code: s.Code(), Message: s.Message()}
}

func invalidArgument(message string) *Error {
	return &Error{Code: codes.InvalidArgument, Message: message}
}
