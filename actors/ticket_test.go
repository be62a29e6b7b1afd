package actors

import (
	"sync"
	"testing"
	"time"

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

// TestTicketReadyChannel: the Ready channel is closed by the delivery whether it was asked for before
// it, after it, or at the same moment, and every caller gets the same channel; Delivered tells the
// outcome is there without any channel.
func TestTicketReadyChannel(t *testing.T) {
	before := new(Ticket).Init()
	early := before.Ready()
	if before.Delivered() {
		t.Fatal("a pending ticket reports its outcome delivered")
	}
	select {
	case <-early:
		t.Fatal("Ready closed before the outcome")
	default:
	}
	before.deliver(Outcome{HoldCount: 1})
	<-early
	if !before.Delivered() || before.Outcome().HoldCount != 1 || before.Ready() != early {
		t.Fatalf("after delivery: delivered %v, outcome %+v, same channel %v", before.Delivered(), before.Outcome(), before.Ready() == early)
	}

	after := new(Ticket).Init()
	after.deliver(Outcome{HoldCount: 2})
	if !after.Delivered() || after.Outcome().HoldCount != 2 {
		t.Fatalf("delivered %v, outcome %+v", after.Delivered(), after.Outcome())
	}
	<-after.Ready()

	for i := 0; i < 200; i++ {
		tk := new(Ticket).Init()
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 4)
		for g := range chans {
			wg.Add(1)
			go func() { defer wg.Done(); chans[g] = tk.Ready() }()
		}
		tk.deliver(Outcome{HoldCount: int64(i)})
		wg.Wait()
		for _, ch := range chans {
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatal("a Ready channel asked for while the outcome was delivered was never closed")
			}
		}
	}
	if NewTicketFunc(func(Outcome) {}).Ready() != nil {
		t.Fatal("a ticket with a notify function has a Ready channel")
	}
}
