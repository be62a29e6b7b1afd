package actors

import "testing"

// TestMailboxUnsafePosterRunsNothingInline: a poster whose own message is not safe (the guardian
// routing a non-inline command, the bridge's reader posting a notice) that wins the idle->running CAS
// does not run, on its own goroutine, a safe message that another poster pushed just before and had
// not CASed yet (simulated by pushing it without the CAS): the dispatcher runs both.
func TestMailboxUnsafePosterRunsNothingInline(t *testing.T) {
	inv := &recordingInvoker{}
	d := &heldDispatcher{throughput: 10}
	mb := newInlineMailbox(func(msg any) bool { return msg.(mailboxMsg).safe })().(*inlineMailbox)
	mb.RegisterHandlers(inv, d)
	// Poster Y: its push and count, then preempted before its CAS.
	mb.mu.Lock()
	mb.user.push(mailboxMsg{poster: 1, n: 1, safe: true})
	mb.mu.Unlock()
	mb.userN.Add(1)
	// Poster X (unsafe message) wins the CAS.
	mb.PostUserMessage(mailboxMsg{poster: 2, n: 1})
	if len(inv.user) > 0 {
		t.Fatalf("the unsafe poster ran %v on its own goroutine", inv.user)
	}
}
