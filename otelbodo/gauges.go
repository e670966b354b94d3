package otelbodo

import (
	"reflect"
	"sync"
	"weak"

	"github.com/bodo-app/bodo-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// gauged is the set of budgets the gauges read: one live client of each key
// on each host, held weakly. A client joins it on its first attempt, and
// only while a MeterProvider that records is in use.
type gauged struct {
	recording func() bool
	mu        sync.Mutex // serialises inserts
	clients   sync.Map   // budgetOf → weak.Pointer[bodo.Client]
}

// budgetOf names one budget: a key (by its KeyID) on a host.
type budgetOf struct{ host, keyID string }

// recordingMeters returns whether metrics of mp are recorded: false for a
// no-op provider, and, for the global one (global true), while none has
// been set (otel.SetMeterProvider).
func recordingMeters(mp metric.MeterProvider, global bool) func() bool {
	if _, ok := mp.(noop.MeterProvider); ok {
		return func() bool { return false }
	}
	if !global {
		return func() bool { return true }
	}
	return func() bool {
		mp := otel.GetMeterProvider()
		if _, ok := mp.(noop.MeterProvider); ok {
			return false
		}
		return !defaultGlobal(mp)
	}
}

// defaultGlobal reports whether mp is the global provider of a program that
// set none: the OTel API's own delegate, which records nothing until one is
// set.
func defaultGlobal(mp metric.MeterProvider) bool {
	t := reflect.TypeOf(mp)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// remember notes c, a client on host, for the gauges: once per key, and not
// at all while nothing records. Dead clients leave the set when another
// joins it.
func (g *gauged) remember(c *bodo.Client, host string) {
	if c == nil || !g.recording() {
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
		for _, l := range b.Levels {
			o.ObserveFloat64(remaining, l.Remaining, metric.WithAttributes(server, id, AttrLevel.String(l.Name), AttrUnit.String(l.Unit)))
		}
		return true
	})
}
