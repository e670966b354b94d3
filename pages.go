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

// ErrEmptyPages is an iteration (the All methods) that the client ended
// because the server answered maxEmptyPages pages in a row without data,
// each with a new nextCursor: nothing reached the caller that could stop
// the iteration, which would have fetched for ever.
var ErrEmptyPages = errors.New("bodo: the server answered page after page without data")

const (
	// maxEmptyPages is how many pages in a row without data an iteration
	// follows.
	maxEmptyPages = 100
	// maxCursors is how many of the cursors it followed last an iteration
	// remembers: a cycle longer than that yields its data again rather
	// than take memory without bound.
	maxCursors = 1 << 16
)

// pageCursors are the cursors one iteration has followed, each kept as a
// hash of a seed drawn per iteration: eight bytes a cursor, however long
// the server makes it. The seed is secret to the process, so a server
// cannot choose a cursor that collides with another.
type pageCursors struct {
	seed   maphash.Seed
	hashes map[uint64]struct{}
	ring   []uint64 // the hashes in the order followed, at most maxCursors; next is the oldest once full
	next   int
	empty  int // pages in a row without data
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
	if len(pc.ring) < maxCursors {
		pc.ring = append(pc.ring, h)
	} else {
		delete(pc.hashes, pc.ring[pc.next])
		pc.ring[pc.next], pc.next = h, (pc.next+1)%maxCursors
	}
	return false
}

// follow returns the error that ends an iteration of operation rather
// than follow cursor, after a page with data or without (empty): the
// cursor was followed before, or maxEmptyPages came in a row; nil when
// the iteration goes on.
func (pc *pageCursors) follow(operation, cursor string, empty bool) error {
	if pc.empty++; !empty {
		pc.empty = 0
	}
	if pc.seen(cursor) {
		return repeatedCursor(operation, cursor)
	}
	if pc.empty >= maxEmptyPages {
		return endedIteration(operation, "Empty pages", fmt.Sprintf("the server answered %d pages in a row without data, each with a new nextCursor; the iteration stops rather than fetch for ever", maxEmptyPages), ErrEmptyPages)
	}
	return nil
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
	return endedIteration(operation, "Repeated cursor", fmt.Sprintf("the server answered nextCursor %q, which this iteration has followed already; it stops rather than fetch the same pages for ever", shown), ErrRepeatedCursor)
}

// endedIteration is the *Error of an iteration of operation that the
// client ended, though the server answered 200, matching sentinel.
func endedIteration(operation, title, detail string, sentinel error) *Error {
	return &Error{Operation: operation, Status: http.StatusOK, Title: title, Detail: detail, sentinel: sentinel}
}
