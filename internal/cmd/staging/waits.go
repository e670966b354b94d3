package main

import (
	"io"
	"strings"
	"sync"
	"time"
)

// waitLog collects, from the client's log of refusals (the agents' stderr
// at -log warn: slog's text lines "time=… level=WARN msg=\"bodo: refused, …\"
// … policy=P … retry_after=D"), the waits the server announced that hold
// every call of the key: those naming no level, a level every call takes
// from, or the key as a whole. A request inside one would come early, so a
// run without requests there is not stalled (stalls in resultOf), as the
// sandbox's stall is a time in which the server would have accepted a call
// that would not come early. A wait on a level only some calls take from
// (write, delete, search, …) holds nothing else and does not count. Each
// process writes to a writer of its own (writer); it is safe for
// concurrent use.
type waitLog struct {
	mu    sync.Mutex
	waits []span
	tail  []byte // the end of what was written that is no refusal, for errors
}

// span is a wait from one moment to another.
type span struct{ from, to time.Time }

// holdsEvery is the policies whose waits hold every call of a key: the
// point levels every call takes from, the calls in flight, the lockout,
// and a refusal naming none (OVERLOADED).
var holdsEvery = map[string]bool{"": true, "key": true, "principal": true, "org": true, "parallel": true, "lockout": true}

// maxTail bounds what a waitLog keeps of what is not a refusal.
const maxTail = 4 << 10

// writer returns a writer of one process's log into w, and the function
// that ends it once the process has ended: it returns when every line
// written has been read.
func (w *waitLog) writer() (io.Writer, func()) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		readLines(pr, w.line)
	}()
	return pw, func() {
		pw.Close()
		<-done
	}
}

// line reads one line of the log. A refusal line always has a policy
// field, empty when the refusal named no level.
func (w *waitLog) line(l string) {
	f := fields(l)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !strings.HasPrefix(f["msg"], "bodo: refused") {
		w.tail = append(w.tail, l+"\n"...)
		if len(w.tail) > maxTail {
			w.tail = w.tail[len(w.tail)-maxTail:]
		}
		return
	}
	at, err := time.Parse(time.RFC3339Nano, f["time"])
	d, err2 := time.ParseDuration(f["retry_after"])
	policy, named := f["policy"]
	if err != nil || err2 != nil || d <= 0 || !named || !holdsEvery[policy] {
		return
	}
	w.waits = append(w.waits, span{at, at.Add(d)})
}

// fields are the key=value pairs of a line of slog's text handler; a
// quoted value ends at the next quote (the client's messages and the
// fields read here hold no escaped one).
func fields(l string) map[string]string {
	m := map[string]string{}
	for l != "" {
		l = strings.TrimLeft(l, " ")
		k, rest, ok := strings.Cut(l, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				break
			}
			v, l = rest[1:end+1], rest[end+2:]
		} else {
			v, l, _ = strings.Cut(rest, " ")
		}
		m[k] = v
	}
	return m
}

// spans returns the waits read so far.
func (w *waitLog) spans() []span {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]span(nil), w.waits...)
}

// String is the end of what the log held besides refusals.
func (w *waitLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.tail)
}
