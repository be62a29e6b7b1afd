package messages

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestEventJSON: every field of an event reaches its JSON form, the type in words.
func TestEventJSON(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 3, 55, 0, time.UTC)
	ev := Event{Type: EventReleased, Name: "orders:42", Kind: LockFair, Owner: "o:1", From: "o:2", Token: 7,
		HoldCount: 1, Queued: true, Time: at, Wait: time.Millisecond, Held: time.Second, Reason: "unlocked",
		Coordinator: "c"}
	b, err := json.Marshal(ev.JSON())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"released","name":"orders:42","kind":"fair","owner":"o:1","from":"o:2","token":7,"hold_count":1,` +
		`"queued":true,"time":"2026-11-26T12:03:55Z","wait_ns":1000000,"held_ns":1000000000,"reason":"unlocked","coordinator":"c"}`
	if string(b) != want {
		t.Fatalf("JSON = %s\nwant   %s", b, want)
	}
	if b, _ := json.Marshal(Event{Type: EventForceUnlocked, Name: "n"}.JSON()); strings.Contains(string(b), "owner") {
		t.Fatalf("empty fields are written: %s", b)
	}
}
