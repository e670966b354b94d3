package budget

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// BenchmarkAnswerLevels measures one admitted getContact and its answer on a
// state that knows the documented levels (their quotas out of reach) and n
// announced policies: the same RateLimit-Policy on every answer (so parsed
// once) and a RateLimit naming the key level. Compare n=8 with n=30: the cost should not grow with the
// levels beyond parsing them.
func BenchmarkAnswerLevels(b *testing.B) {
	for _, n := range []int{8, 30} {
		b.Run(fmt.Sprintf("levels=%d", n), func(b *testing.B) {
			policies := []string{`"key";q=1000000000000;w=60`, `"parallel";q=6;w=1`}
			for i := len(policies); i < n; i++ {
				policies = append(policies, fmt.Sprintf(`"extra-%d";q=1000;w=3600`, i))
			}
			h := http.Header{}
			h.Set("RateLimit-Policy", strings.Join(policies, ", "))
			h.Set("RateLimit", `"key";r=999999999999;t=1`)
			s := New()
			for _, l := range []string{Key, Principal, Org, Egress} {
				s.SetQuota(l, 1e12, 1e12) // nothing a benchmark does comes near
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c := call(ops.GetContact, "")
				tk, _, err := s.Admit(ctx, c)
				if err != nil {
					b.Fatal(err)
				}
				tk.Finish(Answer{Status: http.StatusOK, Header: h})
			}
		})
	}
}
