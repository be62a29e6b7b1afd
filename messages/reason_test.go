package messages

import "testing"

func TestReasonString(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonNone: "none", ReasonNotObtained: "not obtained", ReasonNotHeld: "not held",
		ReasonClosed: "closed", ReasonRedis: "redis error", ReasonUpgrade: "upgrade refused", ReasonNotSynced: "not synced to replicas", ReasonKindMismatch: "kind mismatch",
		Reason(99): "unknown",
	} {
		if got := r.String(); got != want {
			t.Errorf("Reason(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		KindPlain: "plain", KindFair: "fair", KindRead: "read", KindWrite: "write", Kind(9): "unknown",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestErrorWithoutErr(t *testing.T) {
	if got := (&Error{}).Error(); got == "" {
		t.Error("Error{}.Error() is empty")
	}
}
