package sandbox

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// operation is a long run; the sandbox only runs exports, and they always
// succeed after Limits.ExportDuration.
type operation struct {
	id               string
	resource, format string
	records          int
	created          time.Time
	finishes         time.Time
	done             bool
}

type operationJSON struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind"`
	Status     string            `json:"status"`
	CreatedAt  string            `json:"createdAt"`
	FinishedAt *string           `json:"finishedAt"`
	Result     *exportResultJSON `json:"result"`
	Error      *json.RawMessage  `json:"error"`
}

type exportResultJSON struct {
	Records int    `json:"records"`
	URL     string `json:"url"`
}

func (o *operation) view() operationJSON {
	v := operationJSON{ID: o.id, Kind: "export", Status: "running", CreatedAt: timestamp(o.created)}
	if o.done {
		at := timestamp(o.finishes)
		v.Status = "succeeded"
		v.FinishedAt = &at
		v.Result = &exportResultJSON{Records: o.records, URL: "https://files.bodo-app.com/exports/" + o.id + "." + o.format}
	}
	return v
}

// settle finishes every export whose time has come. It runs before each
// request, so an export.succeeded event always precedes the events of
// requests that arrive after the export finished. Exports all last
// ExportDuration, so they finish in the order they started.
func (s *Server) settle(now time.Time) {
	for ; s.settled < len(s.operationIDs); s.settled++ {
		o := s.operations[s.operationIDs[s.settled]]
		if o.finishes.After(now) {
			return
		}
		o.done = true
		s.emit(now, o.finishes, "export.succeeded", o.view())
	}
}

func (s *Server) createExport(c *call, _ *http.Request) answer {
	f, bad := parseObject(c, false)
	if bad != nil {
		return *bad
	}
	var v validator
	resource := v.oneOf(f, "resource", true, "contacts", "invoices")
	format := v.oneOf(f, "format", true, "jsonl", "csv")
	if v.errs != nil {
		return c.invalid(v.errs)
	}
	o := &operation{id: "op_" + s.ids.next(c.now), resource: resource, format: format,
		created: c.now, finishes: c.now.Add(s.lim.ExportDuration)}
	o.records = len(s.contacts)
	if resource == "invoices" {
		o.records = len(s.invoices)
	}
	s.operations[o.id] = o
	s.operationIDs = append(s.operationIDs, o.id)
	a := jsonAnswer(http.StatusAccepted, o.view())
	a.header.Set("Location", "/v1/operations/"+o.id)
	a.writes = 1
	return a
}

func (s *Server) getOperation(c *call, r *http.Request) answer {
	o := s.operations[r.PathValue("id")]
	if o == nil {
		return c.notFound()
	}
	return resourceAnswer(c, o.view())
}

type event struct {
	id, typ string
	created time.Time
	data    json.RawMessage
}

type eventJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// listEvents pages forward with after (a plain event id); nextCursor is the
// id to pass as after next.
func (s *Server) listEvents(c *call, _ *http.Request) answer {
	limit, bad := pageLimit(c)
	if bad != nil {
		return *bad
	}
	after := c.query.Get("after")
	if after != "" && !validID(after, "evt_") {
		return c.badRequest(msg{"after muss eine Ereignis-ID (evt_…) sein.", "after must be an event id (evt_…)."})
	}
	i, found := slices.BinarySearchFunc(s.events, after, func(e event, id string) int {
		switch {
		case e.id < id:
			return -1
		case e.id > id:
			return 1
		}
		return 0
	})
	if found {
		i++
	}
	end := min(i+limit, len(s.events))
	items := make([]eventJSON, 0, end-i)
	for _, e := range s.events[i:end] {
		items = append(items, eventJSON{ID: e.id, Type: e.typ, CreatedAt: timestamp(e.created), Data: e.data})
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].ID
	}
	return listAnswer(items, last, end < len(s.events))
}
