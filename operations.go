package bodo

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// Polling intervals of OperationsService.Wait: from waitFirstPoll, doubling
// up to waitMaxPoll.
const (
	waitFirstPoll = 500 * time.Millisecond
	waitMaxPoll   = 8 * time.Second
)

// OperationFailedError is returned by Wait when the operation ends with
// status failed.
type OperationFailedError struct {
	Operation *Operation
}

func (e *OperationFailedError) Error() string {
	if e.Operation == nil {
		return "bodo: an operation failed"
	}
	msg := "no error given"
	if oe, ok := e.Operation.Error.Get(); ok {
		msg = oe.Code + ": " + oe.Message
	}
	return oneLine(fmt.Sprintf("bodo: operation %s failed: %s", e.Operation.ID, msg))
}

// Unwrap returns the failure as an *Error: the getOperation answer (200)
// that said so, with the operation's error code and message; nil without
// an Operation.
func (e *OperationFailedError) Unwrap() error {
	if e.Operation == nil {
		return nil
	}
	apiErr := &Error{Operation: ops.GetOperation.ID, Status: http.StatusOK, Title: "Operation failed", Detail: "operation " + e.Operation.ID + " failed"}
	if oe, ok := e.Operation.Error.Get(); ok {
		apiErr.Code, apiErr.Detail = oe.Code, oe.Message
	}
	return apiErr
}

// Wait polls the operation id until it is no longer running and returns it:
// every 0.5 s at first, doubling up to every 8 s, each poll one getOperation
// call (1 point). A failed operation is returned with an
// *OperationFailedError, one whose status this client does not know (a
// later version of the API's) with an *Error saying so. The wait ends early
// when ctx ends, with an *Error that wraps ctx's error.
func (s *OperationsService) Wait(ctx context.Context, id string, opts ...RequestOption) (*Operation, error) {
	interval := waitFirstPoll
	for {
		op, err := s.Get(ctx, id, opts...)
		if err != nil {
			return nil, err
		}
		switch op.Status {
		case OperationStatusSucceeded:
			return op, nil
		case OperationStatusFailed:
			return op, &OperationFailedError{Operation: op}
		case OperationStatusRunning:
		default:
			return op, &Error{Operation: ops.GetOperation.ID, Status: http.StatusOK, Title: "Unknown operation status",
				Detail: oneLine(fmt.Sprintf("operation %s is %q, a status this client does not know; it is no longer running", id, op.Status))}
		}
		if err := sleep(ctx, interval); err != nil {
			return op, &Error{Operation: ops.GetOperation.ID, Title: "Wait ended", Detail: fmt.Sprintf("waiting for operation %s: %v", id, err), cause: err}
		}
		interval = min(2*interval, waitMaxPoll)
	}
}
