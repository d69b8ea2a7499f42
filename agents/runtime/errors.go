package runtime

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrCommandTimedOut is wrapped by ExecSync's error when the command ran past
// its timeout (and was killed).
var ErrCommandTimedOut = errors.New("runtime: command timed out")

// NotFoundError is the error for an unknown sandbox or container ID, a gRPC
// status with codes.NotFound as CRI runtimes return.
func NotFoundError(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

// PreconditionError is the error for a call that does not fit an object's
// state (codes.FailedPrecondition).
func PreconditionError(format string, args ...any) error {
	return status.Error(codes.FailedPrecondition, fmt.Sprintf(format, args...))
}

// InvalidArgumentError is the error for a malformed request.
func InvalidArgumentError(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf(format, args...))
}

// IsNotFound reports whether err is (or wraps) a NotFound status.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// IsFailedPrecondition reports whether err is (or wraps) a FailedPrecondition status.
func IsFailedPrecondition(err error) bool { return status.Code(err) == codes.FailedPrecondition }
