package bodo

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrRepeatedCursor is an iteration (the All methods) that the client ended
// because the server answered a nextCursor the iteration had followed
// already: following it again would fetch the same pages for ever.
var ErrRepeatedCursor = errors.New("bodo: the server repeated a page cursor")

// pageCursors are the cursors one iteration has followed.
type pageCursors map[string]struct{}

// seen records cursor (unless it is empty) and reports whether it was
// recorded before.
func (pc *pageCursors) seen(cursor string) bool {
	if cursor == "" {
		return false
	}
	if *pc == nil {
		*pc = pageCursors{}
	}
	if _, ok := (*pc)[cursor]; ok {
		return true
	}
	(*pc)[cursor] = struct{}{}
	return false
}

// maxCursorShown caps how much of a cursor an error quotes.
const maxCursorShown = 64

// repeatedCursor is the error that ends an iteration of operation at a
// cursor it followed before.
func repeatedCursor(operation, cursor string) *Error {
	shown := cursor
	if len(shown) > maxCursorShown {
		shown = shown[:maxCursorShown] + "…"
	}
	return &Error{
		Operation: operation,
		Status:    http.StatusOK,
		Title:     "Repeated cursor",
		Detail:    fmt.Sprintf("the server answered nextCursor %q, which this iteration has followed already; it stops rather than fetch the same pages for ever", shown),
		sentinel:  ErrRepeatedCursor,
	}
}
