package messages

import "testing"

func TestReasonString(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonNone: "none", ReasonNotObtained: "not obtained", ReasonNotHeld: "not held",
		ReasonClosed: "closed", ReasonRedis: "redis error", ReasonUpgrade: "upgrade refused", ReasonNotSynced: "not synced to replicas",
		Reason(99): "unknown",
	} {
		if got := r.String(); got != want {
			t.Errorf("Reason(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}
