// A worker's own counters, and their Prometheus text.
package q4m

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// Counter names, as Metrics() and PrometheusText() give them.
var counterNames = []string{"taken", "succeeded", "failed", "aborted", "dead", "lease_lost",
	"uncertain_ends", "given_back", "reconnects"}

type metrics struct {
	counters map[string]*atomic.Int64
	inFlight atomic.Int64
}

func newMetrics() *metrics {
	m := &metrics{counters: map[string]*atomic.Int64{}}
	for _, n := range counterNames {
		m.counters[n] = new(atomic.Int64)
	}
	return m
}

func (m *metrics) inc(name string) { m.counters[name].Add(1) }

func (m *metrics) snapshot() map[string]int64 {
	out := map[string]int64{"in_flight": m.inFlight.Load()}
	for n, c := range m.counters {
		out[n] = c.Load()
	}
	return out
}

func prometheusText(table string, snap map[string]int64) string {
	names := make([]string, 0, len(snap))
	for n := range snap {
		names = append(names, n)
	}
	sort.Strings(names)
	label := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(table)
	var b strings.Builder
	for _, n := range names {
		kind, metric := "counter", "q4m_worker_"+n+"_total"
		if n == "in_flight" {
			kind, metric = "gauge", "q4m_worker_in_flight"
		}
		fmt.Fprintf(&b, "# TYPE %s %s\n%s{table=\"%s\"} %d\n", metric, kind, metric, label, snap[n])
	}
	return b.String()
}
