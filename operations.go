package bodo

import (
	"context"
	"fmt"
	"time"
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
	msg := "no error given"
	if oe, ok := e.Operation.Error.Get(); ok {
		msg = oe.Code + ": " + oe.Message
	}
	return fmt.Sprintf("bodo: operation %s failed: %s", e.Operation.ID, msg)
}

// Wait polls the operation id until it is no longer running and returns it:
// every 0.5 s at first, doubling up to every 8 s, each poll one getOperation
// call (1 point). A failed operation is returned with an
// *OperationFailedError. The wait ends early, with ctx's error, when ctx ends.
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
		}
		if err := sleep(ctx, interval); err != nil {
			return op, fmt.Errorf("bodo: waiting for operation %s: %w", id, err)
		}
		interval = min(2*interval, waitMaxPoll)
	}
}
