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

	// byNeed queues the waiters of a level again by what they need of
	// it, so that the first of each size can try to pass the first waiter
	// (level.backfills): a handful of sizes, however long the queue.
	byNeed map[float64]*needHeap
}

// waiter is a call's place in the key's queues: in at most one gate at a
// time, the one that holds it.
type waiter struct {
	c     *Call
	seq   uint64 // arrival order, fixed for the whole call
	wake  chan struct{}
	at    *gate // the gate it waits in, nil when none
	index int
	need  float64 // what it needs of the level it waits for
	nidx  int     // its place in that gate's byNeed heap

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

// maxSizes bounds how many sizes of call are woken to try to pass the
// first waiter of a level at once.
const maxSizes = 16

// wakeBehind wakes the first waiter of each size (but the first waiter of
// all), up to maxSizes of them.
func (g *gate) wakeBehind() {
	n := 0
	for _, h := range g.byNeed {
		if len(*h) > 0 && (*h)[0] != g.head() {
			(*h)[0].notify()
			if n++; n == maxSizes {
				return
			}
		}
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
	if g.level != nil {
		if g.byNeed == nil {
			g.byNeed = map[float64]*needHeap{}
		}
		h := g.byNeed[w.need]
		if h == nil {
			h = &needHeap{}
			g.byNeed[w.need] = h
		}
		heap.Push(h, w)
	}
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
	if h := g.byNeed[w.need]; h != nil && w.nidx >= 0 && w.nidx < len(*h) && (*h)[w.nidx] == w {
		heap.Remove(h, w.nidx)
		if len(*h) == 0 {
			delete(g.byNeed, w.need)
		}
	}
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

// needHeap is a gate's waiters of one size, in arrival order.
type needHeap []*waiter

func (h needHeap) Len() int           { return len(h) }
func (h needHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h needHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].nidx = i
	h[j].nidx = j
}
func (h *needHeap) Push(x any) {
	w := x.(*waiter)
	w.nidx = len(*h)
	*h = append(*h, w)
}
func (h *needHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	w.nidx = -1
	return w
}
