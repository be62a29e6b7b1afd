package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// oneShot is a re-armable single timer that sends make(gen) to the actor. Every arm or cancel bumps the
// generation, so a tick that was already in the mailbox when the timer changed is recognised as stale.
type oneShot struct {
	gen    uint64
	cancel scheduler.CancelFunc
}

func (t *oneShot) arm(s *scheduler.TimerScheduler, self *actor.PID, d time.Duration, make func(uint64) any) {
	t.stop()
	t.cancel = s.SendOnce(d, self, make(t.gen))
}

func (t *oneShot) stop() {
	t.gen++
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
}

func (t *oneShot) armed() bool { return t.cancel != nil }

// current reports whether a tick of generation gen is the live one, and disarms the timer if so.
func (t *oneShot) current(gen uint64) bool {
	if gen != t.gen || t.cancel == nil {
		return false
	}
	t.cancel = nil
	return true
}
