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
	name  string
	level *level // the level it guards, if any
	q     waitHeap
}

// waiter is a call's place in the key's queues: in at most one gate at a
// time, the one that holds it.
type waiter struct {
	c     *Call
	seq   uint64 // arrival order, fixed for the whole call
	wake  chan struct{}
	at    *gate // the gate it waits in, nil when none
	index int

	// promised is when it could go when a later call first passed it in
	// the level promisedBy (see level.backfills).
	promisedBy *level
	promised   time.Time
	slack      time.Duration
}

func (w *waiter) notify() {
	if w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// ahead reports whether a call that arrived before w waits in g.
func (g *gate) ahead(w *waiter) bool {
	return len(g.q) > 0 && g.q[0] != w && g.q[0].seq < w.seq
}

func (g *gate) head() *waiter {
	if len(g.q) == 0 {
		return nil
	}
	return g.q[0]
}

// backfillReach is how many waiters behind the first are woken to try to
// pass it (level.backfills): a bound, so that what a change costs does not
// grow with the queue.
const backfillReach = 8

// wakeBehind wakes up to backfillReach waiters near the front of the queue
// (the top of its heap), the first aside.
func (g *gate) wakeBehind() {
	for _, w := range g.q[1:min(len(g.q), backfillReach+1)] {
		w.notify()
	}
}

// wakeHead wakes the first waiter of g, if any.
func (g *gate) wakeHead() {
	if len(g.q) > 0 {
		g.q[0].notify()
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
}

// leave takes w out of its gate and wakes the gate's next waiter when w was
// the first.
func (w *waiter) leave() {
	g := w.at
	if g == nil {
		return
	}
	first := w.index == 0
	heap.Remove(&g.q, w.index)
	w.at, w.promisedBy = nil, nil
	if first {
		g.wakeHead()
	}
}

type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	w.index = -1
	return w
}
