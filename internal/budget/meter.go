package budget

import "time"

// meterWindow is how far back a meter counts.
const meterWindow = 30 * time.Second

// meter counts events (the calls a limiter in front let through, at when
// they were sent) over the last meterWindow, in a ring of the latest
// len(at) of them, to tell their rate.
type meter struct {
	at    [256]time.Time // when the events came, the latest len(at)
	next  int            // where the next event goes
	n     int            // events in the ring
	first time.Time      // the first event ever
	from  time.Time      // events until then are not counted: a limiter in front was empty then
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
// since the first, or since from when that is within the window, when
// that is shorter (at least a second), or over what the ring holds when it
// holds less than a window; 0 before any event. Counted from from, it
// counts one more: the limiter may have held less than a call then.
func (m *meter) rate(now time.Time) float64 {
	if m.n == 0 {
		return 0
	}
	start, extra := m.first, 0
	if !m.from.IsZero() && now.Sub(m.from) <= meterWindow {
		start, extra = m.from, 1
	}
	span := min(meterWindow, max(now.Sub(start), time.Second))
	count, oldest := 0, now
	for _, at := range m.at[:m.n] {
		if now.Sub(at) <= span && at.After(m.from) {
			count++
			oldest = sooner(oldest, at)
		}
	}
	if count == len(m.at) {
		return float64(count) / max(now.Sub(oldest), time.Millisecond).Seconds()
	}
	return float64(count+extra) / span.Seconds()
}
