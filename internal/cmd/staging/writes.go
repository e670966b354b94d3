package main

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// writeLog collects, from bodo-staging's -v log (one line a request:
// "bodo-staging 15:04:05.000000 REQUEST-ID KEY METHOD PATH STATUS ..."),
// when the server answered one of a key's writes with a 2xx, in contract
// seconds from the key's first request. The stats say how many points a
// run took when, not how many writes; the log says that.
//
// An idempotent replay is no write, and the log does not mark one; but the
// replays of the agents answer writes whose connection the server closed
// after committing them (-drop-after-commit), which the log shows as
// "dropped", not 2xx. Each such write is counted once, at its replay.
type writeLog struct {
	key   string
	scale float64
	done  chan struct{} // closed when the log ends

	mu     sync.Mutex
	first  time.Duration // the key's first request, as a time of day
	seen   bool
	writes []float64
}

func newWriteLog(key string, scale float64) *writeLog {
	return &writeLog{key: key, scale: scale, done: make(chan struct{})}
}

// read reads the log until it ends.
func (w *writeLog) read(r io.Reader) {
	defer close(w.done)
	readLines(r, w.line)
}

// readLines hands each line of r to line until r ends; a line longer than
// 1 MiB ends the reading, and the rest of r is drained unread.
func readLines(r io.Reader, line func(string)) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line(s.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}

func (w *writeLog) line(l string) {
	f := strings.Fields(l)
	if len(f) < 7 || f[0] != "bodo-staging" || f[3] != w.key {
		return
	}
	at, ok := timeOfDay(f[1])
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.seen {
		w.first, w.seen = at, true
	}
	status, err := strconv.Atoi(f[6])
	if err != nil || status < 200 || status > 299 {
		return
	}
	switch f[4] {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
		d := at - w.first
		if d < 0 {
			d += 24 * time.Hour
		}
		w.writes = append(w.writes, d.Seconds()*w.scale)
	}
}

// before returns how many writes the server answered in the first secs
// contract seconds.
func (w *writeLog) before(secs float64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.writes {
		if t < secs {
			n++
		}
	}
	return n
}

func timeOfDay(s string) (time.Duration, bool) {
	t, err := time.Parse("15:04:05.000000", s)
	if err != nil {
		return 0, false
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
		time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond()), true
}
