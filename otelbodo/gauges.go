package otelbodo

import (
	"context"
	"sync"
	"weak"

	"github.com/bodo-app/bodo-go"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// gauged is the set of budgets the gauges read: one live client of each key
// on each host, held weakly. A client joins it on its first attempt, and
// only while the meter records: recording is an instrument's Enabled, false
// for a no-op MeterProvider and for the global one while the program has
// set none.
type gauged struct {
	recording func(context.Context) bool
	mu        sync.Mutex // serialises inserts
	clients   sync.Map   // budgetOf → weak.Pointer[bodo.Client]
}

// budgetOf names one budget: a key (by its KeyID) on a host.
type budgetOf struct{ host, keyID string }

// remember notes c, a client on host, for the gauges: once per key, and not
// at all while nothing records. Dead clients leave the set when another
// joins it.
func (g *gauged) remember(ctx context.Context, c *bodo.Client, host string) {
	if c == nil || !g.recording(ctx) {
		return
	}
	k := budgetOf{host, c.KeyID()}
	if p, ok := g.clients.Load(k); ok && p.(weak.Pointer[bodo.Client]).Value() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clients.Range(func(k, p any) bool {
		if p.(weak.Pointer[bodo.Client]).Value() == nil {
			g.clients.Delete(k)
		}
		return true
	})
	g.clients.Store(k, weak.Make(c))
}

// observe reports the budget of every key seen whose client is still alive.
func (g *gauged) observe(o metric.Observer, remaining metric.Float64Observable, waiting metric.Int64Observable) {
	g.clients.Range(func(k, p any) bool {
		c := p.(weak.Pointer[bodo.Client]).Value()
		if c == nil {
			return true
		}
		key := k.(budgetOf)
		b := c.Budget()
		server, id := semconv.ServerAddress(key.host), AttrKeyID.String(key.keyID)
		o.ObserveInt64(waiting, int64(b.Waiting), metric.WithAttributes(server, id))
		var others map[string]float64 // by unit: the least remaining of the levels the contract does not name
		for _, l := range b.Levels {
			unit := unitValue(l.Unit)
			if !contractLevel[l.Name] {
				if r, seen := others[unit]; !seen || l.Remaining < r {
					if others == nil {
						others = map[string]float64{}
					}
					others[unit] = l.Remaining
				}
				continue
			}
			o.ObserveFloat64(remaining, l.Remaining, metric.WithAttributes(server, id, AttrLevel.String(l.Name), AttrUnit.String(unit)))
		}
		for unit, r := range others {
			o.ObserveFloat64(remaining, r, metric.WithAttributes(server, id, AttrLevel.String(otherValue), AttrUnit.String(unit)))
		}
		return true
	})
}
