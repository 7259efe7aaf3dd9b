package lapse

import (
	"testing"
	"time"
)

func TestBackoffDelaysGrowToTheMaxWithJitterBelowEachCeiling(t *testing.T) {
	delays := Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Multiplier: 2}.start()
	for _, ceiling := range []time.Duration{10, 20, 40, 40} {
		ceiling *= time.Millisecond
		if d := delays.next(); d < ceiling/2 || d > ceiling {
			t.Errorf("delay %v, want within [%v, %v]", d, ceiling/2, ceiling)
		}
	}
}

func TestABackoffThatWouldNotWaitIsClampedToAMillisecond(t *testing.T) {
	delays := Backoff{Multiplier: 0.5}.start()
	for i := 0; i < 5; i++ {
		if d := delays.next(); d < time.Millisecond/2 || d > time.Millisecond {
			t.Errorf("delay %v, want within [0.5ms, 1ms]", d)
		}
	}
}
