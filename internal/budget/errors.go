package budget

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HoldError is a call that was still held when its context ended or whose
// deadline falls before the earliest moment it could go.
type HoldError struct {
	Reason string        // what held it: a level, or one of the Reason constants
	Wait   time.Duration // the least it still had to wait; 0 when unknown
	Err    error         // the context's error
}

// Error says what held the call and why it stopped waiting.
func (e *HoldError) Error() string { return "held by " + e.Reason + ": " + e.Err.Error() }

// ErrHoldTooLong is the Err of a HoldError whose wait, one the server asked
// of the key, is longer than the call's MaxHold.
var ErrHoldTooLong = errors.New("the server's wait is longer than the call waits")

// Unwrap returns the context's error or ErrHoldTooLong.
func (e *HoldError) Unwrap() error { return e.Err }

// NeverFitsError is a call bigger than a documented level can ever hold.
type NeverFitsError struct {
	Level, Unit  string
	Amount, Size float64
}

// Error names the level the call can never fit.
func (e *NeverFitsError) Error() string { return "the call can never fit the " + e.Level + " level" }

// ExhaustedError is a call that an exhausted quota would refuse.
type ExhaustedError struct {
	Policy string // "" when the server named none the client knows
	Until  time.Time
}

// Error names the exhausted quota.
func (e *ExhaustedError) Error() string { return "quota " + e.Policy + " exhausted" }

// ctxErr is why ctx ended: ctx.Err(), and its cause as well when that is
// another error (context.WithTimeoutCause), so that errors.Is finds both.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
