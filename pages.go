package bodo

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
)

// ErrRepeatedCursor is an iteration (the All methods) that the client ended
// because the server answered a nextCursor the iteration had followed
// already: following it again would fetch the same pages for ever.
var ErrRepeatedCursor = errors.New("bodo: the server repeated a page cursor")

// pageCursors are the cursors one iteration has followed, each kept as a
// hash of a seed drawn per iteration: eight bytes a cursor, however long
// the server makes it. The seed is secret to the process, so a server
// cannot choose a cursor that collides with another.
type pageCursors struct {
	seed   maphash.Seed
	hashes map[uint64]struct{}
}

// seen records cursor (unless it is empty) and reports whether it was
// recorded before.
func (pc *pageCursors) seen(cursor string) bool {
	if cursor == "" {
		return false
	}
	if pc.hashes == nil {
		pc.seed, pc.hashes = maphash.MakeSeed(), map[uint64]struct{}{}
	}
	h := maphash.String(pc.seed, cursor)
	if _, ok := pc.hashes[h]; ok {
		return true
	}
	pc.hashes[h] = struct{}{}
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
