package budget

import "time"

// meterWindow is how far back a meter counts.
const meterWindow = 30 * time.Second

// meter counts events (accepted answers) over the last meterWindow, in a
// ring of the latest len(at) of them, to tell their rate.
type meter struct {
	at    [256]time.Time
	next  int // where the next event goes
	n     int // events in the ring
	first time.Time
	from  time.Time // events until then are not counted: a limiter in front was empty then
}

func (m *meter) add(now time.Time) {
	if m.first.IsZero() {
		m.first = now
	}
	m.at[m.next] = now
	m.next = (m.next + 1) % len(m.at)
	m.n = min(m.n+1, len(m.at))
}

// rate is the events a second over the last meterWindow, or over the time
// since the first or since from when that is shorter (at least a second),
// or over what the ring holds when it holds less than a window; 0 before
// any event. Counted from from, it counts one more: the limiter may have
// held less than a call then.
func (m *meter) rate(now time.Time) float64 {
	if m.n == 0 {
		return 0
	}
	span := min(meterWindow, max(now.Sub(later(m.first, m.from)), time.Second))
	count := 0
	for i := 1; i <= m.n; i++ {
		at := m.at[(m.next-i+len(m.at))%len(m.at)]
		if now.Sub(at) > span || !at.After(m.from) {
			break
		}
		count++
	}
	if count == len(m.at) {
		span = max(now.Sub(m.at[m.next]), time.Millisecond) // since the oldest
	} else if now.Sub(m.from) <= span {
		count++
	}
	return float64(count) / span.Seconds()
}
