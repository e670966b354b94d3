package budget

import (
	"container/heap"
	"time"
)

// gate is one thing a call may have to wait for: a level, the pace, the
// slots in flight, a pause, the lockout guard or the shared store. Its
// waiters queue in arrival order; only the first is woken when the gate may
// have opened, and it wakes the next when it moves on, so admitting a call
// costs O(log n) in the number of waiting calls.
type gate struct {
	level *level // the level it guards, if any
	q     seqHeap

	// byNeed queues the waiters of a level again by what they need of
	// it, so that the first of each size can try to pass the first waiter
	// (level.backfills): a handful of sizes, however long the queue.
	byNeed map[float64]*seqHeap
}

// waiter is a call's place in the key's queues: in at most one gate at a
// time, the one that holds it.
type waiter struct {
	c    *Call
	seq  uint64 // arrival order, fixed for the whole call
	wake chan struct{}
	at   *gate   // the gate it waits in, nil when none
	pos  [2]int  // its place in its gate's queue and in the queue of its size
	need float64 // what it needs of the level it waits for

	// promised is when it could go when a later call first passed it in
	// the level promisedBy (see level.backfills).
	promisedBy *level
	promised   time.Time
	slack      time.Duration
	wokeBehind time.Time // when it last woke the waiters behind it as the first of a level
}

// notify wakes w; a wake-up still pending is not doubled.
func (w *waiter) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// ahead reports whether a call that arrived before w waits in g.
func (g *gate) ahead(w *waiter) bool {
	return len(g.q.ws) > 0 && g.q.ws[0].seq < w.seq
}

func (g *gate) head() *waiter {
	if len(g.q.ws) == 0 {
		return nil
	}
	return g.q.ws[0]
}

// maxSizes bounds how many sizes of call are woken to try to pass the
// first waiter of a level at once.
const maxSizes = 16

// wakeBehind wakes the first waiter of each size (but the first waiter of
// all), up to maxSizes of them.
func (g *gate) wakeBehind() {
	n := 0
	for _, h := range g.byNeed {
		if len(h.ws) > 0 && h.ws[0] != g.head() {
			h.ws[0].notify()
			if n++; n == maxSizes {
				return
			}
		}
	}
}

// firstOfSize reports whether w is the first waiter of its size in g, a
// level's gate.
func (g *gate) firstOfSize(w *waiter) bool {
	h := g.byNeed[w.need]
	return h != nil && len(h.ws) > 0 && h.ws[0] == w
}

func (g *gate) wakeHead() {
	if len(g.q.ws) > 0 {
		g.q.ws[0].notify()
	}
}

// enter moves w into g (out of the gate it waited in before).
func (w *waiter) enter(g *gate) {
	if w.at == g {
		return
	}
	w.leave()
	heap.Push(&g.q, w)
	w.at = g
	if g.level != nil && len(g.q.ws) == 2 && g.q.ws[0] != w {
		// The first, alone until now, looks again: with a call behind
		// it, it also looks when the level frees something, which may
		// let that call pass it (level.backfills).
		g.q.ws[0].notify()
	}
	if g.level != nil {
		if g.byNeed == nil {
			g.byNeed = map[float64]*seqHeap{}
		}
		h := g.byNeed[w.need]
		if h == nil {
			h = &seqHeap{slot: inSize}
			g.byNeed[w.need] = h
		}
		heap.Push(h, w)
	}
}

// leave takes w out of its gate and wakes the gate's next waiter when w was
// the first, and the next of its size when w was the first of that: only
// the first of each size looks again on its own (attempt.holdLocked).
func (w *waiter) leave() {
	g := w.at
	if g == nil {
		return
	}
	first := w.pos[inQueue] == 0
	heap.Remove(&g.q, w.pos[inQueue])
	if h := g.byNeed[w.need]; h != nil && w.pos[inSize] >= 0 && w.pos[inSize] < len(h.ws) && h.ws[w.pos[inSize]] == w {
		firstOfSize := w.pos[inSize] == 0
		heap.Remove(h, w.pos[inSize])
		if len(h.ws) == 0 {
			delete(g.byNeed, w.need)
		} else if firstOfSize && !first {
			h.ws[0].notify()
		}
	}
	w.at, w.promisedBy = nil, nil
	if first {
		g.wakeHead()
	}
}

// Where a waiter stands in the two heaps of its gate (waiter.pos).
const (
	inQueue = iota // the gate's queue
	inSize         // the queue of its size (gate.byNeed)
)

// seqHeap is waiters in arrival order; slot says which of a waiter's
// positions it keeps up to date, so one waiter can stand in two heaps.
type seqHeap struct {
	ws   []*waiter
	slot int
}

func (h *seqHeap) Len() int           { return len(h.ws) }
func (h *seqHeap) Less(i, j int) bool { return h.ws[i].seq < h.ws[j].seq }
func (h *seqHeap) Swap(i, j int) {
	h.ws[i], h.ws[j] = h.ws[j], h.ws[i]
	h.ws[i].pos[h.slot] = i
	h.ws[j].pos[h.slot] = j
}
func (h *seqHeap) Push(x any) {
	w := x.(*waiter)
	w.pos[h.slot] = len(h.ws)
	h.ws = append(h.ws, w)
}
func (h *seqHeap) Pop() any {
	n := len(h.ws)
	w := h.ws[n-1]
	h.ws[n-1] = nil
	h.ws = h.ws[:n-1]
	w.pos[h.slot] = -1
	return w
}
