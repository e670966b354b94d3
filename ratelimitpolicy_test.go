package bodo

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRateLimitPolicyJSON reads window and resetSeconds as durations and an
// absent capacity as the quota, writes them back as the wire has them, and
// refuses numbers no level can have.
func TestRateLimitPolicyJSON(t *testing.T) {
	var st RateLimitStatus
	wire := `{"policies":[
		{"name":"key","quota":300,"window":60,"unit":"points","remaining":553,"resetSeconds":10,"capacity":600},
		{"name":"parallel","quota":6,"unit":"concurrent-requests","remaining":5,"resetSeconds":0}],
		"lockedUntil":null,"rejectionsLast60s":3}`
	if err := json.Unmarshal([]byte(wire), &st); err != nil {
		t.Fatal(err)
	}
	want := []RateLimitPolicy{
		{Name: "key", Unit: "points", Quota: 300, Window: time.Minute, Capacity: 600, Remaining: 553, Reset: 10 * time.Second},
		{Name: "parallel", Unit: "concurrent-requests", Quota: 6, Capacity: 6, Remaining: 5},
	}
	if len(st.Policies) != 2 || st.Policies[0] != want[0] || st.Policies[1] != want[1] || st.RejectionsLast60s != 3 {
		t.Fatalf("decoded %+v, want %+v and 3 rejections", st, want)
	}
	out, err := json.Marshal(RateLimitPolicy{Name: "write", Unit: "requests", Quota: 60, Window: time.Minute, Capacity: 60, Remaining: 59, Reset: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != `{"name":"write","quota":60,"window":60,"unit":"requests","remaining":59,"resetSeconds":2}` {
		t.Errorf("encoded %s", got)
	}
	for _, bad := range []string{
		`{"name":"key","quota":300,"window":60,"unit":"points","remaining":1,"resetSeconds":-1}`,
		`{"name":"key","quota":300,"window":9300000000000,"unit":"points","remaining":1,"resetSeconds":1}`,
		`{"name":"key","quota":-300,"window":60,"unit":"points","remaining":1,"resetSeconds":1}`,
	} {
		var p RateLimitPolicy
		if err := json.Unmarshal([]byte(bad), &p); err == nil || !strings.Contains(err.Error(), `"key"`) {
			t.Errorf("%s: error %v, want one naming the policy", bad, err)
		}
	}
}
