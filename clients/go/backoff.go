// Retry delays for queue_abort(delay): exponential in the delivery count, capped, jittered.
package q4m

import (
	"math"
	"math/rand"
	"time"
)

// Backoff: Base * 2^(delivery_count-1), at most Cap; Jitter (0..1) takes off up to that
// share at random so that jobs that failed together do not all come back together.
type Backoff struct {
	Base, Cap time.Duration
	Jitter    float64
}

// DefaultBackoff: 1 s, 2 s, 4 s ... up to 5 minutes, less up to 20 %.
var DefaultBackoff = Backoff{Base: time.Second, Cap: 5 * time.Minute, Jitter: 0.2}

// Delay is the wait before a job at its deliveryCount-th delivery (1 the first time) that
// failed is handed out again. rnd in [0,1); nil uses math/rand.
func (b Backoff) Delay(deliveryCount int, rnd func() float64) time.Duration {
	if rnd == nil {
		rnd = rand.Float64
	}
	n := deliveryCount
	if n < 1 {
		n = 1
	}
	d := float64(b.Base) * math.Pow(2, math.Min(float64(n-1), 64))
	if d > float64(b.Cap) {
		d = float64(b.Cap)
	}
	j := math.Min(math.Max(b.Jitter, 0), 1)
	return time.Duration(d * (1 - j*rnd()))
}
