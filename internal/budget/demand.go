package budget

import (
	"net/url"
	"slices"
	"strconv"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// DemandOf returns what a call of op with the given query takes from each
// documented level: its cost from key, principal and org; one write for the
// write classes; one delete from delete and delete-day; and for reads the
// records it may return from egress (a list reserves its limit, settled
// after with State.Settle).
func DemandOf(op *ops.Operation, query url.Values) []Demand {
	cost := float64(op.CostFor(query.Get))
	d := append(make([]Demand, 0, 6), Demand{Key, cost}, Demand{Principal, cost}, Demand{Org, cost})
	if op.Class.IsWrite() {
		d = append(d, Demand{Write, 1})
	}
	if op.Class == ops.ClassDelete {
		d = append(d, Demand{Delete, 1}, Demand{DeleteDay, 1})
	}
	switch op.Egress {
	case ops.EgressOne:
		d = append(d, Demand{Egress, 1})
	case ops.EgressPage:
		limit := 20
		if n, err := strconv.Atoi(query.Get("limit")); err == nil {
			limit = min(max(n, 1), 100)
		}
		d = append(d, Demand{Egress, float64(limit)})
	}
	return d
}

// AddDemand adds d into sum, level by level.
func AddDemand(sum []Demand, d []Demand) []Demand {
	for _, x := range d {
		if i := slices.IndexFunc(sum, func(y Demand) bool { return y.Level == x.Level }); i >= 0 {
			sum[i].Amount += x.Amount
		} else {
			sum = append(sum, x)
		}
	}
	return sum
}

// Demand is what a call takes from one documented level.
type Demand struct {
	Level  string
	Amount float64
}
