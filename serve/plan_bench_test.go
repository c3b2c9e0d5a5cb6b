package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPlanJSON is what /api/plan costs beyond reading the store: the
// readiness, counts, version, layout and the JSON encoding.
func BenchmarkPlanJSON(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		tasks := randomTasks(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var size int
			for b.Loop() {
				var buf bytes.Buffer
				if err := json.NewEncoder(&buf).Encode(planOf(tasks, time.Now())); err != nil {
					b.Fatal(err)
				}
				size = buf.Len()
			}
			b.ReportMetric(float64(size), "bytes/plan")
		})
	}
}
