package actors

import (
	"sync"
	"testing"

	"github.com/lockwarden/lockwarden/messages"
)

func TestTicketDeliverThenAbandon(t *testing.T) {
	tk := NewTicket()
	if !tk.deliver(Outcome{Token: 7}) {
		t.Fatal("deliver on a pending ticket = false, want true")
	}
	if tk.Abandon() {
		t.Fatal("Abandon after deliver = true, want false")
	}
	if got := (<-tk.Result()).Token; got != 7 {
		t.Fatalf("token %d, want 7", got)
	}
}

func TestTicketAbandonThenDeliver(t *testing.T) {
	tk := NewTicket()
	if !tk.Abandon() {
		t.Fatal("Abandon on a pending ticket = false, want true")
	}
	if !tk.Abandoned() {
		t.Fatal("Abandoned = false after Abandon")
	}
	if tk.deliver(Outcome{Reason: messages.ReasonNone}) {
		t.Fatal("deliver after Abandon = true, want false: the actor must undo the acquisition")
	}
	select {
	case o := <-tk.Result():
		t.Fatalf("abandoned ticket received %+v", o)
	default:
	}
}

// TestTicketExactlyOneWins races Abandon against deliver: exactly one must win every time, which is
// what guarantees that no acquisition is both returned to the caller and undone, or neither.
func TestTicketExactlyOneWins(t *testing.T) {
	for range 1000 {
		tk := NewTicket()
		var delivered, abandoned bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); delivered = tk.deliver(Outcome{}) }()
		go func() { defer wg.Done(); abandoned = tk.Abandon() }()
		wg.Wait()
		if delivered == abandoned {
			t.Fatalf("delivered=%v abandoned=%v, want exactly one", delivered, abandoned)
		}
	}
}

func TestOneShotGenerations(t *testing.T) {
	var s oneShot
	if s.armed() {
		t.Fatal("zero oneShot is armed")
	}
	s.gen++ // what arm does before it schedules
	s.cancel = func() {}
	live := s.gen
	if !s.current(live) {
		t.Fatal("current(live generation) = false")
	}
	if s.current(live) {
		t.Fatal("a tick was accepted twice")
	}
	s.cancel = func() {}
	s.stop()
	if s.current(live) {
		t.Fatal("a tick from before stop was accepted")
	}
}

// TestTicketInit: a ticket made with Init (allocated with its command) is answered through Ready and
// Outcome, and Abandon loses to a delivery as it does on a ticket from NewTicket.
func TestTicketInit(t *testing.T) {
	var tk Ticket
	tk.Init()
	if tk.Result() != nil {
		t.Fatal("Result of an Init ticket is not nil")
	}
	select {
	case <-tk.Ready():
		t.Fatal("Ready closed before delivery")
	default:
	}
	if !tk.deliver(Outcome{Token: 9}) {
		t.Fatal("deliver to a pending ticket = false")
	}
	<-tk.Ready()
	if got := tk.Outcome().Token; got != 9 {
		t.Fatalf("token %d, want 9", got)
	}
	if tk.Abandon() {
		t.Fatal("Abandon after delivery = true")
	}
}
